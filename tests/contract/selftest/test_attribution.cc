// SPDX-License-Identifier: MIT
// C3 attribution: kernel events matched to violations by socket (ports)
// or by the millisecond before, and the reason when none matched.
#include "attribution.h"
#include "outputs.h"

#include <gtest/gtest.h>

using namespace sockbuf::contract;
using sockbuf::trace::event;

namespace
{

constexpr int64_t t0 = 5'000'000'000;

json scenario_with_violation(double t_ms)
{
	json viol = {{"clause", "C3"},
		     {"scenario", "pressure"},
		     {"socket", "pressure/raw_unlock/c1/client"},
		     {"what", "SO_SNDBUF (getsockopt)"},
		     {"t_ms", t_ms},
		     {"value", 4608},
		     {"expected", 1048576}};
	json half = {{"verdict", "FAIL"},
		     {"why", "1 violation(s)"},
		     {"violations_total", 1},
		     {"violations", json::array({viol})}};
	json pass = {{"verdict", "pass"},
		     {"why", "w"},
		     {"violations_total", 0},
		     {"violations", json::array()}};
	return {{"name", "pressure"},
		{"seconds", 3.0},
		{"t0_mono_ns", t0},
		{"socket_ports", {{"pressure/raw_unlock/c1/client", {40000, 5001}}}},
		{"verdicts", json::array({{{"clause", "C3"}, {"raw", half}, {"library", pass}}})}};
}

event ev(const char *name, int64_t at_ns, int sport = -1, int dport = -1)
{
	event e;
	e.name = name;
	e.time_ns = at_ns;
	e.sport = sport;
	e.dport = dport;
	return e;
}

const json &first(const json &s)
{
	return s["verdicts"][0]["raw"]["violations"][0]["kernel_events"];
}

trace_run active()
{
	trace_run r;
	r.active = true;
	r.enabled = {"sock:sock_exceed_buf_limit", "kprobe:tcp_enter_memory_pressure"};
	return r;
}

TEST(attribution, same_socket_and_same_millisecond)
{
	json s = scenario_with_violation(400.0);
	const int64_t tv = t0 + 400'000'000;
	event exceed = ev("sock:sock_exceed_buf_limit", tv - 300'000);
	exceed.fields = {
	    {"allocated", "2870"}, {"sysctl_mem", "1433,1911,2866"}, {"wmem_queued", "1048576"}};
	std::vector<event> events = {
	    ev("kprobe:tcp_enter_memory_pressure", tv - 20'000'000, 40000, 5001),
	    ev("kprobe:tcp_enter_memory_pressure", tv - 1'000'000, 5001, 40000), // the peer
	    exceed, ev("sock:sock_exceed_buf_limit", tv - 5'000'000),	      // outside the window
	    ev("kprobe:tcp_enter_memory_pressure", tv + 1'000, 40000, 5001)}; // after
	attribute_c3(&s, events, active());
	const json &k = first(s);
	ASSERT_TRUE(k["found"].get<bool>()) << k.dump();
	ASSERT_EQ(k["events"].size(), 2u);
	EXPECT_EQ(k["events"][0]["match"], "socket");
	EXPECT_DOUBLE_EQ(k["events"][0]["before_ms"].get<double>(), 20.0);
	EXPECT_EQ(k["events"][1]["match"], "window");
	EXPECT_EQ(k["events"][1]["fields"]["allocated"], "2870");
	std::string text = kernel_events_text(s["verdicts"][0]["raw"]["violations"][0]);
	EXPECT_NE(text.find("allocated=2870 pages (above max of sysctl_mem=1433,1911,2866)"),
		  std::string::npos)
	    << text;
	// Every format carries it: KTAP, for a raw (XFAIL) C3 finding too.
	json doc = {{"suite", "sockbuf-contract"},
		    {"library_version", "t"},
		    {"profile", "quick"},
		    {"privileged", true},
		    {"kernel", {{"release", "r"}, {"version", "v"}, {"machine", "m"}}},
		    {"scenarios", json::array({s})}};
	json ok = {{"verdict", "pass"}, {"why", "w"}};
	json integrity = json::object();
	integrity["clause"] = "I";
	integrity["raw"] = ok;
	integrity["library"] = ok;
	json &verdicts = doc["scenarios"][0]["verdicts"];
	verdicts.insert(verdicts.begin(), integrity);
	std::string ktap = render(doc, "ktap", {});
	EXPECT_NE(ktap.find("# C3.raw: first violation: "), std::string::npos) << ktap;
	EXPECT_NE(ktap.find("kprobe:tcp_enter_memory_pressure 20.000 ms before (this socket)"),
		  std::string::npos)
	    << ktap;
}

TEST(attribution, says_why_nothing_was_found)
{
	json s = scenario_with_violation(400.0);
	trace_run off;
	off.reason = "tracing off (--trace off)";
	attribute_c3(&s, {}, off);
	EXPECT_FALSE(first(s)["found"].get<bool>());
	EXPECT_EQ(first(s)["reason"], "tracing off (--trace off)");

	trace_run on = active();
	on.dropped = 7;
	attribute_c3(&s, {ev("sock:sock_exceed_buf_limit", t0 + 398'000'000)}, on);
	std::string why = first(s)["reason"];
	EXPECT_NE(why.find("none recorded in the window"), std::string::npos) << why;
	EXPECT_NE(why.find("ports 40000->5001"), std::string::npos) << why;
	EXPECT_NE(why.find("dropped 7 events"), std::string::npos) << why;
}

} // namespace
