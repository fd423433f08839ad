// SPDX-License-Identifier: MIT
#include "scenario.h"

#include "clock.h"
#include "guard.h"
#include "netns.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
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
	assign_drivers(&set.sockets, first_driver(spec, prof));
	floor_guard thread_guard(&set.sockets, arm::lib_initial, guard_driver::thread,
				 prof.guard_period_us);
	floor_guard timer_guard(&set.sockets, arm::lib_initial, guard_driver::timerfd,
				prof.guard_period_us);
	floor_guard event_guard(&set.sockets, arm::lib_initial, guard_driver::events,
				prof.guard_period_us);
	floor_guard reserve_guard(&set.sockets, arm::lib_reserve, guard_driver::events,
				  prof.guard_period_us);
	const auto guards = {&thread_guard, &timer_guard, &event_guard, &reserve_guard};

	int64_t t0 = now_ns();
	out->t0_ns = t0;
	sampler smp(&set.sockets, t0, prof.sample_period_us);
	if (hooks.filter)
		smp.set_filter(hooks.filter);
	smp.start();
	for (floor_guard *g : guards)
		if (g->sockets())
			g->start();
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
	for (floor_guard *g : guards)
		g->stop();
	if (hooks.at_end)
		hooks.at_end(set);
	smp.stop();
	out->seconds = double(now_ns() - t0) / 1e9;
	// The end state is what the guard's schedule left: a buffer below its
	// floor now was not repaired in time, and C3 must see it.  The last
	// pass runs after (its restore reports still count for C7).
	take_snapshots(&set, true);
	out->sampler = smp.stats();
	for (floor_guard *g : guards) {
		g->last_pass();
		guard_stats st = g->stats();
		if (st.sockets || st.restore_errors)
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
