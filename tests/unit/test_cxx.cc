// SPDX-License-Identifier: MIT
// The C++ layer: same calls, errors as std::error_code, fmt output.
#include "util.h"

#include <sockbuf/format.hpp>
#include <sockbuf/sockbuf.hpp>

#include <gtest/gtest.h>

using namespace sockbuf::test;

namespace
{

TEST(Cxx, SuccessCarriesTheReportAndFloor)
{
	fd s(tcp());
	auto r = sockbuf::set_initial_bufsize(s, {.snd = 131072, .rcv = 131072},
					      sockbuf::flags::fallback_lock);
	ASSERT_TRUE(r);
	EXPECT_EQ(r->snd.effective, 131072);
	sockbuf::floor f = r->floor();
	EXPECT_EQ(f.rcv, 131072);
	auto below = sockbuf::check_floor(s, f);
	ASSERT_TRUE(below);
	EXPECT_EQ(*below, 0);
}

TEST(Cxx, ErrorsAreGenericErrorCodes)
{
	auto r = sockbuf::lock_bufsize(-1, {.snd = 4096});
	ASSERT_FALSE(r);
	EXPECT_EQ(r.error(), std::errc::bad_file_descriptor);
	EXPECT_THROW(r.value(), std::system_error);
	auto st = sockbuf::get_state(-1);
	EXPECT_EQ(st.error(), std::errc::bad_file_descriptor);
	fd u(udp());
	auto i = sockbuf::set_initial_bufsize(u, {.rcv = 4096});
	EXPECT_EQ(i.error(), std::errc::wrong_protocol_type);
}

TEST(Cxx, FormattersSayWhatHappened)
{
	fd s(tcp());
	auto r = sockbuf::lock_bufsize(s, {.snd = 65537});
	ASSERT_TRUE(r);
	std::string text = fmt::format("{}", *r);
	EXPECT_NE(text.find("65537 -> 65536 (lock, locked"), std::string::npos) << text;
	EXPECT_NE(text.find("[odd]"), std::string::npos) << text;
	EXPECT_NE(text.find("rcv untouched"), std::string::npos) << text;
	auto st = sockbuf::get_state(s);
	ASSERT_TRUE(st);
	EXPECT_NE(fmt::format("{}", *st).find("sndbuf 65536"), std::string::npos);
}

TEST(Cxx, ProbeAndRestore)
{
	auto p = sockbuf::probe();
	ASSERT_TRUE(p);
	EXPECT_GT(p->min_sndbuf, 0);
	fd s(tcp());
	auto r = sockbuf::restore_floor(s, {4096, 4096});
	ASSERT_TRUE(r);
	EXPECT_EQ(r->snd.strategy, SOCKBUF_STRAT_HELD);
}

} // namespace

namespace
{

TEST(Cxx, GuardIsDestroyedWithItsScopeAndMoves)
{
	int id = -1;
	{
		auto g = sockbuf::guard::make();
		ASSERT_TRUE(g) << g.error().message();
		id = g->id();
		fd s(tcp());
		EXPECT_FALSE(g->add(s, {65536, 0}));
		EXPECT_EQ(g->add(s, {65536, 0}), std::errc::file_exists);
		EXPECT_EQ(g->start(std::chrono::microseconds(0)), std::errc::invalid_argument);
		sockbuf::guard moved = std::move(*g);
		EXPECT_EQ(moved.id(), id);
		EXPECT_EQ(g->id(), -1);
		auto r = moved.pass();
		ASSERT_TRUE(r);
		EXPECT_EQ(r->sockets, 1);
		auto t = moved.stats();
		ASSERT_TRUE(t);
		EXPECT_EQ(t->passes, 1u);
	}
	EXPECT_EQ(sockbuf_guard_pass(id, nullptr), -EBADF) << "guard outlived its scope";
}

// The C++ flags are the C ones: a guard made with flags::bpf reports the
// BPF source when the iterator loads here, and says why when it does not.
TEST(Cxx, GuardFlagsReachTheGuard)
{
	auto g = sockbuf::guard::make(sockbuf::guard::flags::bpf);
	ASSERT_TRUE(g) << g.error().message();
	fd s(tcp());
	ASSERT_FALSE(g->add(s, {0, 4096}));
	auto r = g->pass();
	ASSERT_TRUE(r);
	auto t = g->stats();
	ASSERT_TRUE(t);
	if (r->diag == SOCKBUF_GUARD_SRC_BPF)
		EXPECT_EQ(t->bpf_err, 0);
	else
		EXPECT_NE(t->bpf_err, 0) << "not used, and no reason given";
	auto plain = sockbuf::guard::make();
	ASSERT_TRUE(plain);
	ASSERT_FALSE(plain->add(s, {0, 4096}));
	ASSERT_TRUE(plain->pass());
	EXPECT_EQ(plain->stats()->bpf_err, -EPERM);
}

// flags::events reaches the guard: loaded (err 0, functions attached) or
// refused with a reason; a guard without it reports -EPERM.
TEST(Cxx, GuardEventsFlagReachesTheGuard)
{
	auto g = sockbuf::guard::make(sockbuf::guard::flags::events);
	ASSERT_TRUE(g) << g.error().message();
	EXPECT_FALSE(g->set_net_interval(std::chrono::seconds(2)));
	EXPECT_TRUE(g->set_net_interval(std::chrono::microseconds(0)));
	auto t = g->event_stats();
	ASSERT_TRUE(t);
	EXPECT_EQ(t->net_interval_us, 2'000'000u);
	if (t->err == 0)
		EXPECT_NE(t->attached, 0u);
	else
		EXPECT_EQ(t->attached, 0u);
	auto plain = sockbuf::guard::make();
	ASSERT_TRUE(plain);
	EXPECT_EQ(plain->event_stats()->err, -EPERM);
}

} // namespace

// add_listener(): the same call, errors as std::error_code.
TEST(Cxx, GuardAddListener)
{
	auto g = sockbuf::guard::make();
	ASSERT_TRUE(g);
	fd l(tcp());
	struct sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
	const sockbuf::floor fl = {65536, 0};
	EXPECT_EQ(g->add_listener(l, fl), std::errc::invalid_argument) << "not listening yet";
	ASSERT_EQ(::listen(l, 4), 0);
	fd u(udp());
	EXPECT_EQ(g->add_listener(u, fl), std::errc::wrong_protocol_type);
	EXPECT_EQ(g->add_listener(l, fl), std::error_code{});
	EXPECT_EQ(g->add_listener(l, fl), std::errc::file_exists);
}
