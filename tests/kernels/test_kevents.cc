// SPDX-License-Identifier: MIT
// The kernel check's event attribution (guest/kevents.cc): which recorded
// events a first dip gets, and, as root with tracefs, that a recorded run
// leaves no tracing instance and no sockbuf_<pid>_ kprobe event behind.
#include "kevents.h"
#include "track.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace sockbuf::kcheck;
using sockbuf::trace::event;

namespace
{

event ev(const char *name, int64_t t, int sport = -1, int dport = -1)
{
	event e;
	e.name = name;
	e.time_ns = t;
	e.sport = sport;
	e.dport = dport;
	e.pid = 7;
	return e;
}

socket_track track_with_dip()
{
	socket_track t;
	t.local_port = 40000;
	t.remote_port = 5201;
	t.t0_mono_ns = 1'000'000'000;
	t.snd_below_initial.ms = 100;
	t.snd_below_initial.mono_ns = 1'100'000'000;
	t.snd_below_initial.prev_mono_ns = 1'095'000'000; // 5 ms before
	t.snd_below_initial.sndbuf = 4608;
	t.snd_below_initial.reference = 87040;
	return t;
}

} // namespace

TEST(kevents, nearest_events_on_the_socket_and_in_the_window_one_per_name)
{
	socket_track t = track_with_dip();
	std::vector<event> events = {
	    ev("kprobe:sk_stream_wait_memory", 1'099'900'000, 40000, 5201),
	    ev("kprobe:sk_stream_wait_memory", 1'099'800'000, 40000, 5201), // same name, older
	    ev("kprobe:tcp_enter_memory_pressure", 1'099'000'000, 40000, 5201),
	    ev("kprobe:sk_stream_wait_memory", 1'099'950'000, 5201, 40000), // the peer's order
	    ev("kprobe:tcp_clamp_window", 1'100'000'001, 40000, 5201),	    // after the dip
	    ev("sock:sock_exceed_buf_limit", 1'097'000'000),		    // no socket, in window
	    ev("sock:sock_exceed_buf_limit", 1'090'000'000),		    // before the window
	};
	events[5].fields = {{"allocated", "40"}, {"sysctl_mem", "8,8,8"}, {"kind", "SK_MEM_SEND"}};
	ojson k = attribute_below(t.snd_below_initial, t, events, "", {"x"}, 0);
	ASSERT_TRUE(k["found"].get<bool>()) << k.dump();
	ASSERT_EQ(k["events"].size(), 3u) << k.dump();
	EXPECT_EQ(k["events"][0]["name"], "kprobe:sk_stream_wait_memory");
	EXPECT_NEAR(k["events"][0]["before_ms"].get<double>(), 0.1, 1e-9);
	EXPECT_EQ(k["events"][0]["match"], "socket");
	EXPECT_EQ(k["events"][1]["name"], "kprobe:tcp_enter_memory_pressure");
	EXPECT_EQ(k["events"][2]["name"], "sock:sock_exceed_buf_limit");
	EXPECT_EQ(k["events"][2]["match"], "window");
	EXPECT_EQ(k["events"][2]["fields"]["allocated"], "40");
	EXPECT_NEAR(k["window_ms"].get<double>(), 5.0, 1e-9);
	EXPECT_EQ(k["sndbuf"], 4608);
	EXPECT_EQ(k["reference"], 87040);
}

TEST(kevents, reasons_and_no_dip)
{
	socket_track t = track_with_dip();
	ojson k = attribute_below(t.snd_below_initial, t, {}, "no tracefs (...)", {}, 0);
	EXPECT_FALSE(k["found"].get<bool>());
	EXPECT_EQ(k["reason"], "no event seen: no tracefs (...)");
	k = attribute_below(t.snd_below_initial, t, {}, "", {"kprobe:a"}, 3);
	EXPECT_FALSE(k["found"].get<bool>());
	EXPECT_NE(k["reason"].get<std::string>().find("ports 40000->5201"), std::string::npos);
	EXPECT_NE(k["reason"].get<std::string>().find("dropped 3"), std::string::npos);
	EXPECT_TRUE(attribute_below(t.snd_below_floor, t, {}, "", {}, 0).is_null());
}

TEST(kevents, off_writes_why)
{
	run_events e(false);
	ojson j = e.finish(socket_track{});
	EXPECT_FALSE(j["recorder"]["active"].get<bool>());
	EXPECT_EQ(j["recorder"]["reason"], "kernel events not recorded (--trace off)");
	EXPECT_TRUE(j["below_initial"].is_null());
}

namespace
{

std::string slurp(const std::string &p)
{
	std::ifstream in(p);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

bool instance_left(const std::string &tracefs)
{
	return access((tracefs + "/instances/sockbuf-" + std::to_string(getpid())).c_str(), F_OK) ==
	       0;
}

} // namespace

// The checker's recording wrapper on this kernel: a loopback connection
// sampled like a run's sender, its first sample taken as a dip (the
// initial size is set above anything), then finish(): its own events, and
// nothing of the tracing setup left afterwards.
TEST(kevents_live, wrapper_records_and_leaves_nothing)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "not root: a tracing instance needs CAP_SYS_ADMIN";
	std::string tracefs, prefix = sockbuf::trace::recorder::kprobe_prefix();
	bool have_kprobes = false;
	ojson j;
	{
		run_events rec(true);
		if (!rec.active()) {
			ojson why = rec.finish(socket_track{});
			GTEST_SKIP() << "recorder unavailable: " << why["recorder"]["reason"];
		}
		tracefs = sockbuf::trace::find_tracefs();
		ASSERT_FALSE(tracefs.empty());
		// A kernel without CONFIG_KPROBE_EVENTS has no kprobe_events
		// file: then only the instance's teardown can be checked.
		have_kprobes = access((tracefs + "/kprobe_events").c_str(), F_OK) == 0;
		if (have_kprobes) {
			EXPECT_NE(slurp(tracefs + "/kprobe_events").find(prefix), std::string::npos)
			    << "no kprobe event of ours while recording";
		} else {
			std::printf("no %s/kprobe_events on this kernel: the kprobe teardown is "
				    "not checked here\n",
				    tracefs.c_str());
		}
		int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		socklen_t len = sizeof(a);
		ASSERT_EQ(bind(l, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
		ASSERT_EQ(listen(l, 1), 0);
		ASSERT_EQ(getsockname(l, reinterpret_cast<sockaddr *>(&a), &len), 0);
		int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ASSERT_EQ(connect(c, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
		int s = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
		ASSERT_GE(s, 0);
		socket_track t;
		t.at_setup.sndbuf = 1 << 30; // every sample is "below its initial size"
		track_sample(c, t, true, 0, true);
		char buf[4096] = {};
		ASSERT_EQ(send(c, buf, sizeof(buf), 0), ssize_t(sizeof(buf)));
		track_sample(c, t, false, 1, true);
		close(c);
		close(s);
		close(l);
		j = rec.finish(t);
	}
	std::printf("%s\n", j.dump(1).c_str());
	EXPECT_TRUE(j["recorder"]["active"].get<bool>());
	EXPECT_GT(j["sender_ports"][0].get<int>(), 0);
	EXPECT_GE(j["recorder"]["seen"]["sock:inet_sock_set_state"]["count"].get<long>(), 1);
	ASSERT_FALSE(j["below_initial"].is_null());
	// Its connect (inet_sock_set_state, on this socket) came before the
	// first sample.
	EXPECT_TRUE(j["below_initial"]["found"].get<bool>()) << j["below_initial"].dump();
	EXPECT_FALSE(instance_left(tracefs));
	// The wrapper's own look after stop(), written into the run's JSON.
	EXPECT_EQ(j["recorder"]["left_after_stop"]["instance"], false);
	if (have_kprobes) {
		EXPECT_EQ(j["recorder"]["left_after_stop"]["kprobes"], 0);
	}
	EXPECT_EQ(slurp(tracefs + "/kprobe_events").find(prefix), std::string::npos)
	    << "kprobe events " << prefix << "* left behind";
}
