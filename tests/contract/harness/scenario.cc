// SPDX-License-Identifier: MIT
#include "scenario.h"

#include "clock.h"
#include "cycle_watch.h"
#include "guard.h"
#include "kernel_clock.h"
#include "netns.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

namespace sockbuf::contract
{

namespace
{

void read_ports(socket_record *s)
{
	sockaddr_storage a = {};
	socklen_t len = sizeof(a);
	auto port = [&]() { return int(ntohs(reinterpret_cast<sockaddr_in *>(&a)->sin_port)); };
	if (s->r == role::listener || s->fd < 0)
		return;
	if (getsockname(s->fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
		s->local_port = port();
	len = sizeof(a);
	if (getpeername(s->fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
		s->peer_port = port();
}

// The driver of the scenario's first guarded connection: alternating
// with the scenario's place in all_scenarios(), so that scenarios of one
// guarded connection take turns and those of several use both drivers.
guard_driver first_driver(const scenario_spec &spec, const profile &prof)
{
	if (prof.first_driver >= 0)
		return guard_driver(prof.first_driver % guard_driver_count);
	const auto &all = all_scenarios();
	for (size_t i = 0; i < all.size(); i++)
		if (std::string(all[i].name) == spec.name)
			return guard_driver(int(i % guard_driver_count));
	return guard_driver::thread;
}

// Every guard together: sums, the longest pass, and the shortest bound
// (the one an unverified verdict is held to).
guard_stats sum_of(const std::vector<guard_stats> &per_driver)
{
	guard_stats t;
	for (const auto &g : per_driver) {
		t.sockets += g.sockets;
		t.passes += g.passes;
		t.violations += g.violations;
		t.restores += g.restores;
		t.restore_errors += g.restore_errors;
		t.max_pass_us = std::max(t.max_pass_us, g.max_pass_us);
		t.max_late_us = std::max(t.max_late_us, g.max_late_us);
		if (g.sockets && (t.bound_us == 0 || g.bound_us < t.bound_us))
			t.bound_us = g.bound_us;
		for (const auto &e : g.events)
			if (t.events.size() < 20)
				t.events.push_back(e);
	}
	return t;
}

// The kernel's clock watches every library-guarded socket of the run:
// false (and why) where it cannot.
void start_clock(const std::vector<socket_record> &sockets, floor_clock *c)
{
	kernel_clock &kc = kernel_clock::get();
	c->why = kc.why();
	if (!kc.available())
		return;
	std::vector<kernel_clock::watch_spec> w;
	for (const auto &s : sockets)
		if ((s.a == arm::lib_initial || s.a == arm::lib_reserve) && s.r != role::listener &&
		    s.inode && (s.snd.floor > 0 || s.rcv.floor > 0))
			w.push_back({s.inode, s.snd.floor, s.rcv.floor});
	int err = kc.begin(w);
	if (err < 0) {
		c->why =
		    fmt::format("the kernel clock's map refused a socket ({})", strerror(-err));
		return;
	}
	c->kernel = true;
	c->functions = kc.functions();
}

// Each socket's dips on the kernel's clock, from the traffic's start @t0;
// a dip still open is charged until @guards_stopped_ns, when the guards
// stopped.  Records of one direction that overlap (in nanoseconds) are one
// dip.
void stop_clock(std::vector<socket_record> *sockets, int64_t t0, int64_t guards_stopped_ns,
		floor_clock *c)
{
	if (!c->kernel)
		return;
	std::vector<clock_record> got =
	    kernel_clock::get().end(guards_stopped_ns, &c->lost, &c->skipped);
	std::map<uint32_t, socket_record *> by_ino;
	for (auto &s : *sockets)
		if ((s.a == arm::lib_initial || s.a == arm::lib_reserve) && s.r != role::listener)
			by_ino[s.inode] = &s;
	std::sort(got.begin(), got.end(), [](const clock_record &x, const clock_record &y) {
		return x.start_ns < y.start_ns;
	});
	std::map<std::pair<uint32_t, int>, clock_record> open; // the dip being merged
	auto emit = [&](const clock_record &g) {
		auto it = by_ino.find(g.ino);
		if (it == by_ino.end())
			return;
		auto &v = g.dir == 0 ? it->second->snd_kdips : it->second->rcv_kdips;
		v.push_back(
		    {(g.start_ns - t0) / 1000, (g.end_ns - t0) / 1000, g.start_fn, g.end_fn});
	};
	for (const auto &g : got) {
		auto key = std::make_pair(g.ino, g.dir);
		auto it = open.find(key);
		if (it != open.end() && g.start_ns <= it->second.end_ns) {
			if (g.end_ns > it->second.end_ns || g.end_fn < 0) {
				it->second.end_ns = std::max(it->second.end_ns, g.end_ns);
				it->second.end_fn = g.end_fn;
			}
			continue;
		}
		if (it != open.end())
			emit(it->second);
		open[key] = g;
	}
	for (const auto &[key, g] : open)
		emit(g);
	if (c->lost)
		c->why = fmt::format("the kernel clock's ring lost {} dips", c->lost);
}

} // namespace

std::vector<arm> arms_times(int per_arm)
{
	std::vector<arm> v;
	for (int i = 0; i < per_arm; i++)
		for (int a = 0; a < arm_count; a++)
			v.push_back(arm(a));
	return v;
}

void run_scenario(const scenario_spec &spec, const profile &prof, const run_hooks &hooks,
		  scenario_result *out)
{
	out->name = spec.name;
	long t[3];
	if (read_triple("/proc/sys/net/ipv4/tcp_rmem", t))
		out->tcp_rmem2 = int(t[2]);
	if (read_triple("/proc/sys/net/ipv4/tcp_wmem", t))
		out->tcp_wmem2 = int(t[2]);

	scenario_plan plan;
	std::string skip = spec.plan(prof, &plan);
	if (skip.empty() && plan.prepare)
		skip = plan.prepare();
	if (!skip.empty()) {
		out->skip_reason = skip;
		return;
	}
	// The daemon mode's namespaces before any connection or thread
	// (served.h); where it cannot run, its connections rotate over the
	// other modes and the note says why.
	served_guard served;
	bool daemon_ok = false;
	if (plan.daemon_mode) {
		const std::string why = served.prepare(prof.daemon);
		daemon_ok = why.empty();
		if (!daemon_ok)
			plan.notes.push_back("daemon mode skipped: " + why);
	}
	out->initial_snd = plan.sizes.snd;
	out->initial_rcv = plan.sizes.rcv;
	out->needs_growth = plan.needs_growth;
	out->no_growth_reason = plan.no_growth_reason;
	out->notes = plan.notes;

	connection_set set;
	std::string what;
	int err = open_connections(spec.name, plan.arms, plan.sizes, &set, &what, hooks.setup);
	if (err < 0) {
		out->aborted = fmt::format("{}: {}", what, strerror(-err));
		out->data.errors.push_back(out->aborted);
		out->sockets = set.sockets;
		if (plan.cleanup)
			plan.cleanup();
		return;
	}
	take_snapshots(&set, false);
	for (auto &s : set.sockets)
		read_ports(&s);

	// The guards are made before the traffic's clock starts, as an
	// application makes them before it sends: an events guard loads its
	// BPF programs in sockbuf_guard_new() (vmlinux BTF, verifier,
	// trampolines: about a second under qemu TCG), which inside the run
	// would read as a gap before every socket's first sample.
	assign_drivers(&set.sockets, first_driver(spec, prof), daemon_ok);
	// The served process and the cutter are forked before any thread of
	// this process starts.
	if (daemon_ok) {
		const std::string why = served.start(set.sockets);
		if (!why.empty())
			plan.notes.push_back("daemon mode: " + why);
	}
	cutter cuts;
	cut_spec cut = plan.cuts;
	cut.seed = prof.seed ? prof.seed : uint64_t(now_ns());
	if (cut.count > 0) {
		const std::string why = cuts.start(set.sockets, cut);
		if (!why.empty())
			plan.notes.push_back("no cuts from outside: " + why);
	}
	floor_guard thread_guard(&set.sockets, arm::lib_initial, guard_driver::thread,
				 prof.guard_period_us);
	floor_guard timer_guard(&set.sockets, arm::lib_initial, guard_driver::timerfd,
				prof.guard_period_us);
	floor_guard event_guard(&set.sockets, arm::lib_initial, guard_driver::events,
				prof.guard_period_us);
	floor_guard reserve_guard(&set.sockets, arm::lib_reserve, guard_driver::events,
				  prof.guard_period_us);
	const auto guards = {&thread_guard, &timer_guard, &event_guard, &reserve_guard};

	start_clock(set.sockets, &out->clock);
	int64_t t0 = now_ns();
	out->t0_ns = t0;
	sampler smp(&set.sockets, t0, prof.sample_period_us);
	if (hooks.filter)
		smp.set_filter(hooks.filter);
	// Read with the samples: the guards' run-queue waits, the clock's
	// skipped runs (judge/cycle_watch.h).
	cycle_watch watch(t0, out->clock.kernel);
	smp.set_watch(&watch);
	smp.start();
	int slot = 0;
	for (floor_guard *g : guards) {
		if (g->sockets()) {
			g->start();
			watch.add_thread(slot, g->tid());
			watch.add_programs(slot, g->programs(), g->programs_why());
		}
		slot++;
	}
	cuts.go(t0);
	std::thread during, plan_during;
	if (hooks.during)
		during = std::thread(hooks.during, std::ref(set), t0);
	if (plan.during)
		plan_during = std::thread(plan.during, std::ref(set), t0);

	plan.traffic(set, t0 + int64_t(plan.seconds * 1e9), &out->data);

	if (during.joinable())
		during.join();
	if (plan_during.joinable())
		plan_during.join();
	// Every cut is made while the guards run.
	std::vector<cut_record> made;
	if (cuts.started()) {
		const pid_t cutter_pid = cuts.pid();
		made = cuts.finish();
		out->cuts = summarize_cuts(made, set.sockets, cut);
		plan.notes.push_back(cuts_text(out->cuts, cut, cutter_pid));
	}
	for (floor_guard *g : guards)
		g->stop();
	served.stop();
	const int64_t guards_stopped = now_ns();
	if (hooks.at_end)
		hooks.at_end(set);
	smp.stop();
	stop_clock(&set.sockets, t0, guards_stopped, &out->clock);
	out->seconds = double(now_ns() - t0) / 1e9;
	// The end state is what the guard's schedule left: a buffer below its
	// floor now was not repaired in time, and C3 must see it.  The last
	// pass runs after (its restore reports still count for C7).
	take_snapshots(&set, true);
	out->sampler = smp.stats();
	out->clock.skips = watch.skips(out->clock.skipped);
	out->clock.thp = watch.thp();
	out->clock.thp_why = watch.thp_why();
	slot = 0;
	for (floor_guard *g : guards) {
		g->last_pass();
		guard_stats st = g->stats(prof.cost);
		st.sched = watch.sched(slot);
		st.sched_why = watch.sched_why(slot);
		st.blocked = watch.blocked(slot);
		st.blocked_why = watch.blocked_why(slot);
		st.skips = watch.guard_skips(slot);
		st.skips_why = watch.guard_skips_why(slot++);
		if (st.sockets || st.restore_errors)
			out->guards.push_back(std::move(st));
	}
	if (daemon_ok) {
		guard_stats st = served.stats(prof.cost);
		plan.notes.push_back(served_text(st, prof.daemon));
		for (const auto &e : st.events)
			plan.notes.push_back("daemon mode: " + e);
		if (st.sockets)
			out->guards.push_back(std::move(st));
	}
	out->guard = sum_of(out->guards);
	out->sockets = set.sockets;
	out->notes = plan.notes; // the run may have added some
	set.close_all();
	if (plan.cleanup)
		plan.cleanup();
}

} // namespace sockbuf::contract
