// SPDX-License-Identifier: MIT
// What the floor guard's tests share: a guard that is destroyed on scope
// exit, one guarding a socket, a size source forced through the seam, a refused io_uring, and why
// a source is missing on this kernel (for a reported skip).
#pragma once

#include "guard.h"
#include "guard_source_name.h"
#include "sys.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cap-ng.h>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace sockbuf::test
{

inline constexpr int floor_size = 131072;

// A guard destroyed on scope exit.
struct guard_id {
	int id;
	explicit guard_id(unsigned int flags) : id(sockbuf_guard_new(flags)) {}
	~guard_id()
	{
		if (id >= 0)
			sockbuf_guard_destroy(id);
	}
	guard_id(const guard_id &) = delete;
	guard_id &operator=(const guard_id &) = delete;
};

// A guard of @flags over one TCP socket with a send floor of floor_size;
// @initial: the socket set to that size first.  added: all of it worked.
struct guarded_socket {
	guard_id g;
	fd s;
	bool added = false;
	explicit guarded_socket(unsigned int flags, bool initial = false) : g(flags), s(tcp())
	{
		const struct sockbuf_floor fl = {floor_size, 0};
		added =
		    g.id >= 0 && s >= 0 &&
		    (!initial || sockbuf_set_initial_bufsize(s, floor_size, 0, 0, nullptr) == 0) &&
		    sockbuf_guard_add(g.id, s, &fl) == 0;
	}
};

// Pushes a buffer below its floor the way a caller (or BPF) would: a plain
// SO_SNDBUF, which also locks it.
inline void push_below(int s)
{
	int small = 8192;
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ASSERT_LT(sndbuf(s), floor_size);
}

inline constexpr int auto_source = -1;

// For a child process that tests a guard without privileges: drops every
// capability, then makes a guard of @flags guarding one TCP socket at
// floor_size (send).  status: 0, or what the child exits with (3: the
// capabilities could not be dropped, 4: the set-up failed).  The child
// ends with _exit(), which leaves the guard and the socket as they are.
struct uncapable_guard {
	int status = 0, g = -1, s = -1;
	explicit uncapable_guard(unsigned int flags)
	{
		capng_clear(CAPNG_SELECT_BOTH);
		if (capng_apply(CAPNG_SELECT_CAPS) != 0) {
			status = 3;
			return;
		}
		g = sockbuf_guard_new(flags);
		s = tcp();
		const struct sockbuf_floor fl = {floor_size, 0};
		if (g < 0 || s < 0 ||
		    sockbuf_set_initial_bufsize(s, floor_size, 0, 0, nullptr) != 0 ||
		    sockbuf_guard_add(g, s, &fl) != 0)
			status = 4;
	}
};

// A size source as a parameterised test's name says it ("auto" for
// auto_source).
inline std::string source_name(const ::testing::TestParamInfo<int> &i)
{
	return guard_source_name(i.param, "auto");
}

// Every guard made while it lives uses one size source (seam); -1: the
// guard's own choice.
struct forced_source {
	explicit forced_source(int src) { sockbuf::guard::force_source(src); }
	~forced_source() { sockbuf::guard::force_source(auto_source); }
	forced_source(const forced_source &) = delete;
	forced_source &operator=(const forced_source &) = delete;
};

// io_uring_setup refused while it lives, as kernel.io_uring_disabled=2 or
// a seccomp filter would.
struct ring_refused {
	ring_refused()
	{
		sockbuf::sys::set_uring_setup_hook([](unsigned int, void *) { return -EPERM; });
	}
	~ring_refused() { sockbuf::sys::set_uring_setup_hook(nullptr); }
	ring_refused(const ring_refused &) = delete;
	ring_refused &operator=(const ring_refused &) = delete;
};

// Why this kernel and process give the guard no @src source
// (SOCKBUF_GUARD_SRC_URING or _BPF; "" when they do): what a guard forced
// onto io_uring, or asked for BPF, reports after one pass.
inline std::string source_missing(int src)
{
	const bool bpf = src == SOCKBUF_GUARD_SRC_BPF;
	forced_source force(bpf ? auto_source : src);
	guard_id g(bpf ? SOCKBUF_GUARD_BPF : 0);
	fd s(tcp());
	struct sockbuf_floor fl = {0, 4096};
	struct sockbuf_guard_report rep;
	struct sockbuf_guard_totals t;
	if (g.id < 0 || sockbuf_guard_add(g.id, s, &fl) != 0 ||
	    sockbuf_guard_pass(g.id, &rep) != 0 || sockbuf_guard_stats(g.id, &t) != 0)
		return "the guard itself failed";
	if (rep.diag == src)
		return "";
	return bpf ? std::string("BPF iterator unavailable: ") + strerror(-t.bpf_err)
		   : std::string("io_uring socket commands unavailable: ") + strerror(-t.uring_err);
}

// The source a guard uses on its first pass, by what is forced.
inline int first_source(int forced)
{
	if (forced != auto_source)
		return forced;
	return source_missing(SOCKBUF_GUARD_SRC_URING).empty() ? SOCKBUF_GUARD_SRC_URING
							       : SOCKBUF_GUARD_SRC_GETSOCKOPT;
}

// A test run once per size source (SOCKBUF_GUARD_SRC_*, or auto_source):
// a source this kernel or process lacks is a reported skip with the
// reason.
class per_source : public ::testing::TestWithParam<int>
{
protected:
	void SetUp() override
	{
		const int src = GetParam();
		std::string why = src == SOCKBUF_GUARD_SRC_URING || src == SOCKBUF_GUARD_SRC_BPF
				      ? source_missing(src)
				      : "";
		if (!why.empty())
			GTEST_SKIP() << why;
	}
};

} // namespace sockbuf::test
