// SPDX-License-Identifier: MIT
// Dips under the floor, from fake samples: their lengths per buffer over
// both sources, the per-scenario percentiles, and C3's library half
// judging each dip against the bound of the driver that guarded the
// socket (a dip longer than that bound fails under either driver; the
// same dip within it passes).
#include "clauses.h"
#include "cycle_watch.h"
#include "dips.h"
#include "report.h"
#include "report_doc.h"
#include "sampler.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <numeric>

namespace sockbuf::contract
{
namespace
{

TEST(Dips, NearestRankPercentiles)
{
	std::vector<int64_t> v(100);
	std::iota(v.begin(), v.end(), 1); // 1..100
	EXPECT_EQ(nearest_rank(v, 0.50), 50);
	EXPECT_EQ(nearest_rank(v, 0.99), 99);
	EXPECT_EQ(nearest_rank(v, 1.0), 100);
	EXPECT_EQ(nearest_rank({1, 2, 3, 4}, 0.50), 2);
	EXPECT_EQ(nearest_rank({1, 2, 3, 4}, 0.99), 4);
	EXPECT_EQ(nearest_rank({7}, 0.50), 7);
	EXPECT_EQ(nearest_rank({7}, 0.99), 7);

	// In any order; a long tail shows in p99 and max, not in p50.
	std::vector<int64_t> us(200, 1000);
	us[17] = 90'000;
	us[150] = 40'000;
	us[3] = 30'000;
	dip_summary d = summarize_dips(us);
	EXPECT_EQ(d.count, 200u);
	EXPECT_EQ(d.p50_us, 1000);
	EXPECT_EQ(d.p99_us, 30'000); // rank 198 of 200: the third longest
	EXPECT_EQ(d.max_us, 90'000);

	dip_summary none = summarize_dips({});
	EXPECT_EQ(none.count, 0u);
	EXPECT_EQ(none.p50_us, 0);
	EXPECT_EQ(none.p99_us, 0);
	EXPECT_EQ(none.max_us, 0);
}

// A buffer's samples in order (time in us, whether under the floor), and
// when sampling stopped.
struct sample {
	int64_t us;
	bool under;
};

dip_log logged(std::initializer_list<sample> samples, int64_t end_us)
{
	dip_log l;
	for (const sample &s : samples)
		l.note(s.us, s.under);
	l.end(end_us);
	return l;
}

TEST(Dips, OneDipPerBufferOverBothSources)
{
	// Cycle 10: both sources under; cycle 20: getsockopt reads it back
	// at the floor but inet_diag under, in either order: the dip goes on.
	// Cycle 40: both at the floor; cycle 50 under again: a second dip.
	const dip_log l = logged({{10, true},
				  {10, true},
				  {20, false},
				  {20, true},
				  {30, true},
				  {30, false},
				  {40, false},
				  {40, false},
				  {50, true},
				  {60, false},
				  {70, true}},
				 80);
	ASSERT_EQ(l.dips.size(), 3u);
	EXPECT_EQ(l.dips[0].first_us, 10);
	EXPECT_EQ(l.dips[0].seen_us(), 20) << "first to last sample under the floor";
	EXPECT_EQ(l.dips[0].us(), 40) << "from the start (no sample above before) to 40";
	EXPECT_EQ(l.dips[1].seen_us(), 0) << "one sample under: seen for no measurable time";
	EXPECT_EQ(l.dips[1].us(), 20) << "last sample above (40) to first above after (60)";
	EXPECT_EQ(l.dips[2].first_us, 70);
	EXPECT_EQ(l.dips[2].us(), 20) << "open when sampling stopped at 80";
	EXPECT_EQ(l.longest().first_us, 10);
	EXPECT_EQ(l.longest().us(), 40);
	EXPECT_EQ(l.longest_seen().seen_us(), 20);
}

// After a dip closes the buffer may read above for a long time: the next
// dip's upper bound starts at the last of those samples, not the first.
TEST(Dips, UpperBoundStartsAtTheLastSampleAboveBeforeIt)
{
	dip_log l;
	l.note(0, true);
	l.note(10, false);
	for (int64_t t = 20; t <= 5000; t += 10)
		l.note(t, false);
	l.note(5010, true);
	l.end(5020);
	ASSERT_EQ(l.dips.size(), 2u);
	EXPECT_EQ(l.dips[1].before_us, 5000);
	EXPECT_EQ(l.dips[1].us(), 20);
}

TEST(Dips, UpperBoundStartsAfterTheSampleAboveOfAnEarlierCycle)
{
	// Cycle 10 reads above with both sources; cycle 20 reads above with
	// getsockopt and under with inet_diag (under wins): the dip began
	// after 10, not after 20.
	const dip_log l = logged(
	    {{10, false}, {10, false}, {20, false}, {20, true}, {30, false}, {30, false}}, 40);
	ASSERT_EQ(l.dips.size(), 1u);
	EXPECT_EQ(l.dips[0].before_us, 10);
	EXPECT_EQ(l.dips[0].after_us, 30);
	EXPECT_EQ(l.dips[0].us(), 20);
}

constexpr int floor_size = 131072;

// A scenario of one lib_initial connection guarded by @d, sampled every
// millisecond for a second (both sources) by the sampler's own record
// path; the client's send buffer reads @below from 200 ms for @dip_ms.
scenario_result fake_run(guard_driver d, int64_t dip_ms, int64_t thread_bound_us,
			 int64_t timerfd_bound_us)
{
	scenario_result r;
	r.name = "fake";
	r.seconds = 1;
	r.sampler.max_gap_ms = 1;
	r.sampler.cycles = 1000;
	for (role ro : {role::client, role::server}) {
		socket_record s;
		s.name = std::string("fake/lib_initial/c2/") + role_name(ro);
		s.a = arm::lib_initial;
		s.r = ro;
		s.conn = 2;
		s.fd = 100;
		s.driver = d;
		s.snd.floor = s.rcv.floor = floor_size;
		r.sockets.push_back(s);
	}
	for (int64_t t = 0; t < 1'000'000; t += 1000)
		for (auto &s : r.sockets)
			for (source src : {source::getsockopt, source::inet_diag}) {
				bool under = s.r == role::client && t >= 200'000 &&
					     t <= 200'000 + dip_ms * 1000;
				sampler::record(&s, src, under ? 4608 : floor_size, floor_size, t);
			}
	for (auto &s : r.sockets) {
		for (track *t : {&s.gs_snd, &s.gs_rcv, &s.diag_snd, &s.diag_rcv})
			t->end(1'000'000);
		s.snd_dips.end(1'000'000);
		s.rcv_dips.end(1'000'000);
	}
	guard_stats th, tf;
	th.driver = "thread";
	tf.driver = "timerfd";
	th.sockets = d == guard_driver::thread ? 2 : 0;
	tf.sockets = d == guard_driver::timerfd ? 2 : 0;
	th.bound_us = thread_bound_us;
	tf.bound_us = timerfd_bound_us;
	// Their threads found, no run-queue wait read.
	th.tid = tf.tid = 1;
	r.guards = {th, tf};
	r.guard.bound_us = std::min(thread_bound_us, timerfd_bound_us);
	return r;
}

class DipUnderDriver : public testing::TestWithParam<guard_driver>
{
};

TEST_P(DipUnderDriver, LongerThanItsBoundFails)
{
	const guard_driver d = GetParam();
	scenario_result r = fake_run(d, 60, 51'000, 51'000);
	verdict v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	ASSERT_EQ(v.lib.violations.size(), 1u);
	const violation &x = v.lib.violations.front();
	EXPECT_EQ(x.socket, "fake/lib_initial/c2/client");
	EXPECT_EQ(x.value, 4608);
	EXPECT_EQ(x.floor, floor_size);
	EXPECT_EQ(x.t_ms, 200.0);
	EXPECT_NE(x.what.find("SO_SNDBUF (getsockopt, inet_diag) under the floor for 60.000 ms"),
		  std::string::npos)
	    << x.what;
	EXPECT_NE(x.what.find(std::string(driver_name(d)) + ", bound 51.0 ms, between samples"),
		  std::string::npos)
	    << x.what;
}

TEST_P(DipUnderDriver, WithinItsBoundPasses)
{
	scenario_result r = fake_run(GetParam(), 40, 51'000, 51'000);
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	// Timed between samples: 40 ms seen, 42 ms from the sample above
	// before it to the one after.
	EXPECT_NE(
	    v.lib.why.find(fmt::format("{} on 2 sockets (bound 51.0 ms, scheduler wait excused up "
				       "to 0.0 ms): 1 dips, p50/p99/max 42.000/42.000/42.000 ms "
				       "under",
				       driver_name(GetParam()))),
	    std::string::npos)
	    << v.lib.why;
	EXPECT_NE(v.lib.why.find("sampled clock, upper bounds"), std::string::npos) << v.lib.why;
}

INSTANTIATE_TEST_SUITE_P(Drivers, DipUnderDriver,
			 testing::Values(guard_driver::thread, guard_driver::timerfd),
			 [](const auto &p) { return std::string(driver_name(p.param)); });

TEST(Dips, EachSocketIsHeldToItsOwnDriversBound)
{
	// The timerfd guard's longest pass made its bound 100 ms: a 70 ms
	// dip under it passes, the same dip under the thread (51 ms) fails.
	EXPECT_EQ(judge_c3(fake_run(guard_driver::timerfd, 70, 51'000, 100'000)).lib.o,
		  outcome::pass);
	EXPECT_EQ(judge_c3(fake_run(guard_driver::thread, 70, 51'000, 100'000)).lib.o,
		  outcome::fail);
}

// The sampler missed the client of a guarded connection for @gap_ms once
// (its getsockopt and inet_diag tracks alike).
void widen_client_gap(scenario_result *r, int64_t gap_ms)
{
	for (auto &s : r->sockets)
		if (s.r == role::client)
			for (track *t : {&s.gs_snd, &s.gs_rcv, &s.diag_snd, &s.diag_rcv})
				t->max_gap_us = std::max(t->max_gap_us, gap_ms * 1000);
}

TEST(Dips, EachSocketsGapsAreHeldToItsOwnDriversBound)
{
	// A 120 ms gap in the samples of a socket whose guard's bound is
	// 200 ms cannot hide a dip longer than that bound: verified, though
	// another driver of the same scenario promises 51 ms.  The same gap
	// under the 51 ms guard leaves the verdict unverified, naming the
	// socket and its guard.
	scenario_result r = fake_run(guard_driver::timerfd, 30, 51'000, 200'000);
	widen_client_gap(&r, 120);
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	EXPECT_EQ(v.lib.gap_ms, 120.0);
	EXPECT_EQ(v.lib.bound_ms, 200.0);

	r = fake_run(guard_driver::thread, 30, 51'000, 200'000);
	widen_client_gap(&r, 120);
	v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	EXPECT_EQ(v.lib.gap_ms, 120.0);
	EXPECT_EQ(v.lib.bound_ms, 51.0);
	EXPECT_NE(v.lib.why.find("samples up to 120.0 ms apart (fake/lib_initial/c2/client "
				 "SO_SNDBUF (getsockopt)), longer than the 51 ms repair bound "
				 "of its guard (thread)"),
		  std::string::npos)
	    << v.lib.why;

	// The gaps between sampling cycles reach every socket: past the
	// 200 ms bound they leave the timerfd socket unverified too.
	r = fake_run(guard_driver::timerfd, 30, 51'000, 200'000);
	r.sampler.max_gap_ms = 250;
	v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	EXPECT_EQ(v.lib.gap_ms, 250.0);
	EXPECT_NE(v.lib.why.find("between sampling cycles"), std::string::npos) << v.lib.why;
}

TEST(Dips, BoundIsComputedFromTheConfigurationAlone)
{
	// A pass costs the default pass_cost's 5 ms plus 20 us per socket:
	// 5.04 ms over 2 sockets.  10 ms interval: the library's
	// thread rests as long as a pass took, so its period is 10.08 ms, the
	// timerfd loop's 10 ms.
	EXPECT_EQ(guard_pass_cost_us(2), 5'040);
	EXPECT_EQ(repair_bound_us(10'000, 2), 10'080 + 5'040);
	EXPECT_EQ(repair_bound_us(10'000, 2, false), 10'000 + 5'040);
	// 1,000 sockets: 25 ms passes stretch the period.
	EXPECT_EQ(repair_bound_us(10'000, 1000), 50'000 + 25'000);
	EXPECT_EQ(repair_bound_us(10'000, 1000, false), 25'000 + 25'000);
	// --pass-cost 50000,1000 (the qemu guests'): 52 ms passes over 2
	// sockets, a thread period of two passes.
	const pass_cost guest{50'000, 1'000};
	EXPECT_EQ(guard_pass_cost_us(2, guest), 52'000);
	EXPECT_EQ(repair_bound_us(10'000, 2, true, guest), 104'000 + 52'000);
	EXPECT_EQ(repair_bound_us(10'000, 2, false, guest), 52'000 + 52'000);
	// The guard's own figures (a 300 ms pass, passes 260 ms late) change
	// nothing: a 250 ms dip fails the configuration's bound.
	const int64_t b = repair_bound_us(1000, 2);
	scenario_result r = fake_run(guard_driver::thread, 250, b, b);
	r.guards[0].max_late_us = 260'000;
	r.guards[0].max_pass_us = 300'000;
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	ASSERT_FALSE(v.lib.violations.empty());
	EXPECT_NE(v.lib.violations[0].what.find("(thread, bound 15.1 ms, between samples)"),
		  std::string::npos)
	    << v.lib.violations[0].what;
}

// A dip the samples saw for less than the bound but whose upper bound
// (sample above before, sample above after) is past it cannot be ruled
// out: unverified, never a pass.
TEST(Dips, SampledUpperBoundPastTheBoundIsUnverified)
{
	verdict v = judge_c3(fake_run(guard_driver::thread, 50, 51'000, 51'000));
	ASSERT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	EXPECT_NE(v.lib.why.find("fake/lib_initial/c2/client SO_SNDBUF under the floor for 50.0 "
				 "to 52.0 ms, between samples (thread bound 51.0 ms)"),
		  std::string::npos)
	    << v.lib.why;
}

// The fake run with the kernel's clock: the judge's functions in their
// order (judge/floor_judge.bpf.c), and no sampled dip unless @dip_ms.
scenario_result kernel_run(guard_driver d, int64_t dip_ms, int64_t bound_us)
{
	scenario_result r = fake_run(d, dip_ms, bound_us, bound_us);
	r.clock.kernel = true;
	r.clock.why = "fexit on ...";
	r.clock.functions = {"__sk_mem_raise_allocated",
			     "__tcp_check_space",
			     "sk_page_frag_refill",
			     "tcp_stream_alloc_skb",
			     "tcp_rcv_established",
			     "tcp_sendmsg_locked",
			     "tcp_recvmsg",
			     "sock_setsockopt"};
	return r;
}

socket_record &client_of(scenario_result *r)
{
	for (auto &s : r->sockets)
		if (s.r == role::client)
			return s;
	return r->sockets.front();
}

// On the kernel's clock each dip is held to its bound at its own length,
// whatever the samples' gaps: a 60 ms dip the samples never saw fails a
// 51 ms bound, a 40 ms one passes even with samples 120 ms apart.
TEST(Dips, KernelClockJudgesEachDipAtItsLength)
{
	scenario_result r = kernel_run(guard_driver::thread, -1, 51'000);
	widen_client_gap(&r, 120);
	client_of(&r).snd_kdips = {{200'000, 260'000, 0, 7}};
	verdict v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	ASSERT_EQ(v.lib.violations.size(), 1u);
	EXPECT_NE(v.lib.violations[0].what.find(
		      "SO_SNDBUF under the floor for 60.000 ms (thread, bound 51.0 ms, left below "
		      "in __sk_mem_raise_allocated, back at sock_setsockopt)"),
		  std::string::npos)
	    << v.lib.violations[0].what;

	r = kernel_run(guard_driver::thread, -1, 51'000);
	client_of(&r).snd_kdips = {{200'000, 240'000, 0, 7}};
	widen_client_gap(&r, 120);
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	EXPECT_NE(v.lib.why.find("kernel clock (fexit on ...)"), std::string::npos) << v.lib.why;
	json j = scenario_json(r, {v}, false)["floor_judge"];
	EXPECT_EQ(j["clock"], "kernel");
	EXPECT_EQ(j["missed"], 0);
	EXPECT_EQ(j["thread"]["dips"], 1);
	EXPECT_EQ(j["thread"]["max_us"], 40'000);
	EXPECT_EQ(j["thread"]["bound_us"], 51'000);
	EXPECT_EQ(j["thread"]["verdict"], "pass");

	// Still below when the run ended: judged up to the end.
	r = kernel_run(guard_driver::thread, -1, 51'000);
	widen_client_gap(&r, 120);
	client_of(&r).rcv_kdips = {{900'000, 1'000'000, 4, -1}};
	v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_NE(v.lib.violations[0].what.find("SO_RCVBUF under the floor for 100.000 ms"),
		  std::string::npos);
	EXPECT_NE(v.lib.violations[0].what.find("still below at the end"), std::string::npos)
	    << v.lib.violations[0].what;
}

// A dip the samples saw and the kernel's clock did not is counted as
// missed and judged by its samples: the clock cannot hide a dip.
TEST(Dips, DipTheKernelClockMissedIsJudgedBySamples)
{
	scenario_result r = kernel_run(guard_driver::thread, 60, 51'000);
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["missed"], 1);
	// A kernel dip that ends before the last sample under the floor did
	// not see all of it: still missed, still judged by the samples.
	client_of(&r).snd_kdips = {{199'500, 230'000, 0, 7}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["missed"], 1);
	// Two kernel dips holding the first and the last sample (restored
	// and cut again between samples): seen, judged at their lengths.
	client_of(&r).snd_kdips = {{199'500, 230'000, 0, 7}, {231'000, 260'500, 0, 7}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["missed"], 0);
}

// The guard's own measure of its records' wait (max_wait_ns) widens no
// bound: a 920 ms dip of a watched cut fails the 50 ms event bound
// whatever the guard says it waited.  The guard's thread's run-queue
// wait the judge read from the kernel inside the dip is excused, shown
// per dip (sched_wait_us): 900 ms of it lets the same dip pass.
TEST(Dips, OnlyTheSchedulersMeasuredWaitIsExcused)
{
	auto run = [](int64_t dip_us) {
		scenario_result r = kernel_run(guard_driver::events, -1, 1'000'000);
		guard_stats g;
		g.driver = "events";
		g.sockets = 2;
		g.bound_us = 61'000'000;
		g.events_err = 0;
		g.attached = SOCKBUF_GUARD_EV_MEM_RAISE;
		g.restored_events = 1;
		g.max_wait_us = 900'000;
		g.tid = 1;
		r.guards = {g};
		widen_client_gap(&r, 2000); // samples too sparse to end it
		client_of(&r).snd_kdips = {{100'000, 100'000 + dip_us, 0, 7}};
		return r;
	};
	scenario_result r = run(920'000);
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	json j = scenario_json(r, {v}, false)["floor_judge"]["events"];
	EXPECT_EQ(j["bound_us"], guard_event_bound_us);
	EXPECT_EQ(j["late_us"], 900'000) << "the guard's own figure, in no bound";
	EXPECT_EQ(j["over"][0]["sched_wait_us"], 0);
	// The kernel says the thread waited runnable 900 ms, read once a
	// millisecond from 101 ms on (every reading inside the dip), and 30
	// ms more found by a reading at 100.5 ms (the reading before it, at
	// 99 ms, was before the dip: it may all have been before, none is
	// excused).
	r = run(920'000);
	r.guards[0].sched = {{99'000, 100'500, 30'000}};
	for (int64_t t = 101'000; t < 1'001'000; t += 1000)
		r.guards[0].sched.push_back({t, t + 1000, 1000});
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	j = scenario_json(r, {v}, false)["floor_judge"]["events"];
	EXPECT_EQ(j["longest"][0]["sched_wait_us"], 900'000) << j.dump();
	EXPECT_EQ(j["max_sched_wait_us"], 900'000);
	EXPECT_NE(v.lib.why.find("scheduler wait excused up to 900.0 ms"), std::string::npos)
	    << v.lib.why;
	// The wait read in a step that began 1 ms into the dip counts at
	// most 1 ms: the reading before it saw none of it.
	EXPECT_EQ(sched_wait_us({{101'000, 1'001'500, 900'000}}, 100'000, 1'020'000), 1000);
	EXPECT_EQ(sched_wait_us({{500'000, 1'001'500, 900'000}}, 100'000, 1'020'000), 400'000);
	EXPECT_EQ(sched_wait_us({{500'000, 1'001'500, 300'000}}, 100'000, 1'020'000), 300'000);
	// A step that reaches past the dip's end counts all but the time from
	// the end to its second reading; one whose first reading is before
	// the dip's start, or after its end, nothing.
	EXPECT_EQ(sched_wait_us({{500'000, 1'030'000, 300'000}}, 100'000, 1'020'000), 290'000);
	EXPECT_EQ(sched_wait_us({{500'000, 1'030'000, 450'000}}, 100'000, 1'020'000), 390'000);
	EXPECT_EQ(sched_wait_us({{99'000, 200'000, 50'000}}, 100'000, 1'020'000), 0);
	EXPECT_EQ(sched_wait_us({{1'021'000, 1'030'000, 5'000}}, 100'000, 1'020'000), 0);
	// Without the thread's schedstat nothing is excused, and the JSON
	// says why.
	r = run(920'000);
	for (int64_t t = 101'000; t < 1'001'000; t += 1000)
		r.guards[0].sched.push_back({t, t + 1000, 1000});
	r.guards[0].sched_why = "no schedstat";
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["events"]["sched_not_excused"],
		  "no schedstat");
}

// A kernel dip the samples saw end (a reading at or above the floor
// inside it) had ended by then: the clock missed its end (a run the
// kernel skipped), and it is cut at that reading, counted, and judged as
// an upper bound.  Samples below all along leave it whole.
TEST(Dips, KernelDipTheSamplesSawEndIsCutThere)
{
	// Samples: under the floor from 200 to 210 ms only; the kernel's
	// dip from 200 ms lasts 400 ms and ends at tcp_rcv_established.
	scenario_result r = kernel_run(guard_driver::thread, 10, 51'000);
	client_of(&r).snd_kdips = {{200'000, 600'000, 0, 4}};
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	json j = scenario_json(r, {v}, false)["floor_judge"];
	EXPECT_EQ(j["cut_by_samples"], 1);
	EXPECT_EQ(j["missed"], 0);
	EXPECT_LE(j["thread"]["max_us"].get<int64_t>(), 15'000);
	// Under the floor in the samples as long as in the kernel: whole.
	r = kernel_run(guard_driver::thread, 400, 51'000);
	client_of(&r).snd_kdips = {{200'000, 600'000, 0, 4}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["cut_by_samples"], 0);
	// Sparse samples that end it past the bound: an upper bound only.
	r = kernel_run(guard_driver::thread, -1, 51'000);
	widen_client_gap(&r, 100);
	client_of(&r).snd_kdips = {{200'000, 600'000, 0, 4}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	EXPECT_NE(v.lib.why.find("back at or above by the samples"), std::string::npos)
	    << v.lib.why;
}

// An events guard with the kernel clock (attached at the watched cut
// points) and samples every millisecond.
scenario_result events_kernel_run(int64_t dip_ms)
{
	scenario_result r = kernel_run(guard_driver::events, dip_ms, 1'000'000);
	guard_stats g;
	g.driver = "events";
	g.sockets = 2;
	g.bound_us = 61'000'000; // the safety net's
	g.events_err = 0;
	g.attached = SOCKBUF_GUARD_EV_MEM_RAISE;
	g.restored_events = 1;
	g.tid = 1;
	r.guards = {g};
	return r;
}

// A dip the kernel clock missed is held to its mode's bound by its
// samples, never the safety net's: seen past the event bound fails, an
// upper bound alone past it is unverified.  (Under the old rule both
// passed against the net's 61 s.)
TEST(Dips, MissedDipOfAnEventsGuardIsHeldToTheEventBound)
{
	const int64_t b = guard_event_bound_us;
	scenario_result r = events_kernel_run(b / 1000 + 10);
	verdict v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_NE(v.lib.violations[0].what.find("the kernel clock missed it"), std::string::npos)
	    << v.lib.violations[0].what;
	EXPECT_NE(v.lib.violations[0].what.find(fmt::format("bound {:.1f} ms", b / 1e3)),
		  std::string::npos)
	    << v.lib.violations[0].what;
	json j = scenario_json(r, {v}, false)["floor_judge"];
	EXPECT_EQ(j["missed"], 1);
	EXPECT_EQ(j["events"]["verdict"], "fail");
	// Seen 49 ms, 51 ms from the sample above before to the one after.
	r = events_kernel_run(b / 1000 - 1);
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	// Well within: a pass.
	r = events_kernel_run(10);
	EXPECT_EQ(judge_c3(r).lib.o, outcome::pass);
}

// A run of the clock's programs the kernel skipped (its count is per
// program, not per socket) during a dip may have been that dip's start
// or end: the dip is unverified, however short it looked.  A skip
// outside every dip changes nothing; skips the readings could not place
// (after the last one) reach every dip from there on.
TEST(Dips, SkippedClockRunDuringADipLeavesItUnverified)
{
	scenario_result r = kernel_run(guard_driver::thread, -1, 51'000);
	widen_client_gap(&r, 120);
	client_of(&r).snd_kdips = {{200'000, 210'000, 0, 7}};
	r.clock.skipped = 1;
	r.clock.skips = {{205'000, 205'600, 1}};
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	EXPECT_NE(v.lib.why.find("skipped during it"), std::string::npos) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["thread"]["skipped_dips"], 1);
	r.clock.skips = {{400'000, 400'600, 1}};
	EXPECT_EQ(judge_c3(r).lib.o, outcome::pass);
	r.clock.skips = {{400'000, INT64_MAX, 1}};
	EXPECT_EQ(judge_c3(r).lib.o, outcome::pass);
	r.clock.skips = {{150'000, INT64_MAX, 1}};
	EXPECT_EQ(judge_c3(r).lib.o, outcome::unverified);
	// Past the bound with a skip during it: unverified, not a failure
	// (the skipped run may have been the write that ended it).
	client_of(&r).snd_kdips = {{200'000, 300'000, 0, 7}};
	r.clock.skips = {{205'000, 205'600, 1}};
	EXPECT_EQ(judge_c3(r).lib.o, outcome::unverified);
}

// The samples end a kernel dip no sooner than their cycle allows: a
// sample carries its cycle's start time and is read up to the longest
// cycle later.  With a cycle that took 500 ms, a reading above at 211 ms
// may have been taken at 711 ms, so the kernel's 400 ms dip stands (and
// fails); with the old rule (twice the mean cycle) it was cut to 13 ms
// and passed.
TEST(Dips, SampleEndAllowsForTheCyclesOwnLength)
{
	scenario_result r = kernel_run(guard_driver::thread, 10, 51'000);
	client_of(&r).snd_kdips = {{200'000, 600'000, 0, 4}};
	r.sampler.mean_cycle_us = 600;
	r.sampler.max_cycle_us = 500'000;
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["cut_by_samples"], 0);
	// Short cycles: the reading at 211 ms ends it there (an upper bound).
	r.sampler.max_cycle_us = 900;
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["cut_by_samples"], 1);
}

// Without the kernel clock an events guard's dips cannot be held to the
// event bound (the samples do not say where a cut was made): unverified,
// not a pass under the safety net's minute.
TEST(Dips, EventsDipsWithoutTheKernelClockAreUnverified)
{
	scenario_result r = fake_run(guard_driver::events, 30, 51'000, 51'000);
	guard_stats g;
	g.driver = "events";
	g.sockets = 2;
	g.bound_us = 61'000'000;
	g.events_err = 0;
	r.guards = {g};
	verdict v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	EXPECT_NE(v.lib.why.find("cannot be told without the kernel clock"), std::string::npos)
	    << v.lib.why;
	EXPECT_EQ(scenario_json(r, {v}, false)["floor_judge"]["events"]["verdict"], "unverified");
	// No dip: nothing to tell, a pass.
	r = fake_run(guard_driver::events, -1, 51'000, 51'000);
	r.guards = {g};
	EXPECT_EQ(judge_c3(r).lib.o, outcome::pass);
}

// An events guard: a cut its programs watch is held to the event bound
// plus the guard's lateness, any other dip to the safety net's; and
// watched cuts written back with no restore on a record fail.
// A kernel-clock run of one events guard (its programs on
// __sk_mem_raise_allocated and __tcp_check_space, a net of 1.1 s) that
// restored @by_record directions on records, whose records waited up to
// @wait_us by its own account.
scenario_result events_run(uint64_t by_record, int64_t wait_us)
{
	scenario_result r = kernel_run(guard_driver::events, -1, 1'000'000);
	guard_stats g;
	g.driver = "events";
	g.sockets = 2;
	g.bound_us = 1'100'000; // the safety net's
	g.events_err = 0;
	g.attached = SOCKBUF_GUARD_EV_MEM_RAISE | SOCKBUF_GUARD_EV_DUNDER_CHECK_SPACE;
	g.restored_events = by_record;
	g.max_wait_us = wait_us;
	g.tid = 1;
	r.guards = {g};
	widen_client_gap(&r, 2000); // samples too sparse to end a dip
	return r;
}

TEST(Dips, EventsGuardHeldToTheEventBound)
{
	const int64_t b = guard_event_bound_us;
	scenario_result r = events_run(1, 0);
	client_of(&r).snd_kdips = {{100'000, 100'000 + b / 2, 0, 7},
				   {300'000, 300'000 + 200'000, 7, 7}}; // a write: net
	verdict v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	json j = scenario_json(r, {v}, false)["floor_judge"]["events"];
	EXPECT_EQ(j["bound_us"], b);
	EXPECT_EQ(j["restored_by_record"], 1);
	EXPECT_EQ(j["watched_cuts"], 1);
	EXPECT_EQ(j["cuts_by_function"]["sock_setsockopt"], 1);

	r = events_run(1, 0);
	client_of(&r).snd_kdips = {{100'000, 100'000 + b + 1000, 1, 7}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	// Records waited up to 5 ms for the guard's thread, by the guard's
	// own account: nothing more is allowed.
	r = events_run(1, 5000);
	client_of(&r).snd_kdips = {{100'000, 100'000 + b + 1000, 1, 7}};
	EXPECT_EQ(judge_c3(r).lib.o, outcome::fail);
	// First seen at tcp_rcv_established, where no cut is watched: the
	// clock missed the cut, which may have been a watched one.  Held to
	// the event bound; past it, unverified (not the net's pass).
	r = events_run(1, 0);
	client_of(&r).snd_kdips = {{300'000, 300'000 + 200'000, 4, 7}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::unverified) << v.lib.why;
	EXPECT_NE(v.lib.why.find("a function the guard does not watch"), std::string::npos)
	    << v.lib.why;

	// Cuts written back, none on a record: the event path did not work.
	r = events_run(0, 0);
	client_of(&r).snd_kdips = {{100'000, 100'000 + b / 2, 0, 7}};
	v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::fail) << v.lib.why;
	EXPECT_NE(v.lib.why.find("none on a record"), std::string::npos) << v.lib.why;
}

// A run of the guard's own programs the kernel skipped during a dip (the
// judge's reading of their recursion_misses) may have been its cut's
// record: the dip is held to the skip bound (a second and the event
// bound), not the event bound.  A skip outside the dip changes nothing;
// past the skip bound it fails.  The guard's thread blocked inside the
// dip is reported with it and never excused.
TEST(Dips, GuardsSkippedRunHoldsTheDipToTheSkipBound)
{
	const int64_t b = guard_event_bound_us;
	ASSERT_GT(guard_skip_bound_us, 1'000'000);
	scenario_result r = events_run(1, 0);
	client_of(&r).snd_kdips = {{100'000, 100'000 + 6 * b, 0, 7}};
	r.guards[0].blocked = {{300'000, 300'700, 200'000}}; // all inside the dip
	verdict v = judge_c3(r);
	ASSERT_EQ(v.lib.o, outcome::fail) << "no skip: the event bound holds";
	json j = scenario_json(r, {v}, false)["floor_judge"]["events"];
	EXPECT_EQ(j["over"][0]["blocked_us"], 200'000);
	EXPECT_EQ(j["over"][0]["thp_collapses"], 0);
	EXPECT_EQ(j["guard_skip_dips"], 0);

	r.guards[0].skips = {{120'000, 120'600, 2}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::pass) << v.lib.why;
	j = scenario_json(r, {v}, false)["floor_judge"]["events"];
	EXPECT_EQ(j["guard_skip_dips"], 1);
	EXPECT_EQ(j["guard_skipped_runs"], 2);
	EXPECT_EQ(j["skip_bound_us"], guard_skip_bound_us);
	EXPECT_EQ(j["longest"][0]["bound_us"], guard_skip_bound_us);
	EXPECT_EQ(j["longest"][0]["guard_skipped"], true);

	r.guards[0].skips = {{700'000, 700'600, 1}};
	EXPECT_EQ(judge_c3(r).lib.o, outcome::fail) << "a skip after the dip excused it";

	// Unread (no programs found): nothing widens the bound.
	r.guards[0].skips = {{120'000, 120'600, 2}};
	r.guards[0].skips_why = "no program of the guard's found in the kernel's list";
	EXPECT_EQ(judge_c3(r).lib.o, outcome::fail);

	r.guards[0].skips_why.clear();
	client_of(&r).snd_kdips = {{100'000, 100'000 + guard_skip_bound_us + 1000, 0, 7}};
	r.guards[0].skips = {{120'000, 120'600, 1}};
	v = judge_c3(r);
	EXPECT_EQ(v.lib.o, outcome::fail) << "past the skip bound";
}

TEST(Dips, ReportedPerDriverAndArm)
{
	scenario_result r = fake_run(guard_driver::timerfd, 30, 51'000, 51'000);
	verdict v = judge_c3(r);
	json s = scenario_json(r, {v}, false);
	const json &lib = s["dips"]["lib_initial"];
	EXPECT_EQ(lib["count"], 1);
	EXPECT_EQ(lib["p50_ms"], 30.0);
	EXPECT_EQ(lib["p99_ms"], 30.0);
	EXPECT_EQ(lib["max_ms"], 30.0);
	EXPECT_EQ(s["dips"]["raw_unlock"]["count"], 0);
	ASSERT_EQ(s["floor_guard"]["drivers"].size(), 2u);
	EXPECT_EQ(s["floor_guard"]["drivers"][0]["driver"], "thread");
	EXPECT_EQ(s["floor_guard"]["drivers"][0]["dips"]["count"], 0);
	EXPECT_EQ(s["floor_guard"]["drivers"][1]["driver"], "timerfd");
	EXPECT_EQ(s["floor_guard"]["drivers"][1]["dips"]["max_ms"], 30.0);

	json doc = report_of(r, {v});
	std::string text = text_report(doc);
	EXPECT_NE(text.find("fake             timerfd                2     1    30.0    30.0    "
			    "30.0    51.0\n"),
		  std::string::npos)
	    << text;
	EXPECT_NE(
	    markdown_report(doc).find(
		"timerfd on 2 sockets (bound 51.0 ms, scheduler wait excused up to 0.0 ms): 1 "
		"dips, p50/p99/max 32.000/32.000/32.000 ms"),
	    std::string::npos);
	const json &fj = s["floor_judge"];
	EXPECT_EQ(fj["clock"], "sampled");
	EXPECT_EQ(fj["timerfd"]["dips"], 1);
	EXPECT_EQ(fj["timerfd"]["max_us"], 32'000) << "sample above before to sample above after";
	EXPECT_EQ(fj["timerfd"]["bound_us"], 51'000);
	EXPECT_EQ(fj["timerfd"]["verdict"], "pass");
}

// Reserve mode's dips are told apart by whether the reservation took: the
// verdict and the JSON say which sockets went under.
TEST(Dips, ReserveModeDipsSplitByReservation)
{
	scenario_result r = fake_run(guard_driver::thread, 30, 51'000, 51'000);
	for (auto &s : r.sockets) {
		s.a = arm::lib_reserve;
		s.reserved = s.r == role::server; // the client, which dips, was refused
	}
	for (auto &g : r.guards)
		g.a = arm::lib_reserve;
	verdict v = judge_c3(r);
	EXPECT_NE(v.lib.why.find("dips: 0 with the reservation in force (max 0.0 ms), 1 "
				 "without (max 30.0 ms)"),
		  std::string::npos)
	    << v.lib.why;
	json j = scenario_json(r, {v}, false);
	EXPECT_EQ(j["dips"]["lib_reserve_in_force"]["count"], 0);
	EXPECT_EQ(j["dips"]["lib_reserve_refused"]["count"], 1);
	EXPECT_EQ(j["dips"]["lib_reserve_refused"]["max_ms"], 30.0);
}

// An events guard that polls for want of its programs is marked '*' in
// the text table and its reason printed once under it; one that got its
// programs is not marked.
TEST(Dips, PollingEventsGuardIsMarkedWithItsReason)
{
	scenario_result r = fake_run(guard_driver::timerfd, 30, 51'000, 51'000);
	guard_stats polled, attached;
	polled.driver = attached.driver = "events";
	polled.sockets = attached.sockets = 2;
	polled.bound_us = attached.bound_us = 61'000;
	polled.events_err = -EPERM;
	attached.events_err = 0;
	attached.a = arm::lib_reserve;
	r.guards.push_back(polled);
	r.guards.push_back(attached);
	verdict v = judge_c3(r);
	json doc = report_of(r, {v});
	const std::string text = text_report(doc);
	EXPECT_NE(text.find("fake             events*                2     0       -       -    "
			    "   -    61.0\n"),
		  std::string::npos)
	    << text;
	EXPECT_NE(text.find("fake             reserve/events         2     0"), std::string::npos)
	    << text;
	EXPECT_EQ(text.find("reserve/events*"), std::string::npos) << text;
	const std::string why =
	    "* events did not load (" + std::string(std::strerror(EPERM)) + "): the guard polls\n";
	EXPECT_NE(text.find(why), std::string::npos) << text;
	EXPECT_EQ(text.find(why), text.rfind(why)) << "the reason printed more than once";
}

} // namespace
} // namespace sockbuf::contract
