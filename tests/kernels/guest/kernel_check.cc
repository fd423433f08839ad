// SPDX-License-Identifier: MIT
// sockbuf-kernel-check - what one kernel does to TCP buffers set by the
// library, on a veth pair between two network namespaces, written as JSON.
//
// Runs inside a qemu guest (tests/kernels/run-matrix): the namespaces, the
// veth pair and the netem delay are set up by the guest's init; this
// program only transfers and samples.  Scenarios:
//   untouched    kernel defaults                        (raw property)
//   initial      set_initial_bufsize on listener+client (library)
//   locked       lock_bufsize: the old way, for contrast
//   initial_force set_initial with SOCKBUF_F_ALLOW_FORCE at --size (meant
//                above net.core.[wr]mem_max and tcp_[wr]mem[2]), after the
//                raw facts: FORCE stored, SO_BUF_LOCK 0 keeps it, which
//                sysctls a new network namespace owns (written only with
//                --allow-global-changes)
//   tcp_mem      set_initial sender, net.ipv4.tcp_mem lowered under the
//                memory in use mid-transfer             (raw, global change)
//   tcp_mem_restore  same, with sockbuf_restore_floor on every sample
//   memcg_raw, memcg_initial, memcg_reserve, memcg_lock, memcg_guard ("memcg": all five)
//                only the sender in a cgroup v2 memory group whose
//                memory.max is lowered mid-transfer; raw setsockopt +
//                SO_BUF_LOCK 0, set_initial, set_initial with
//                SOCKBUF_F_RESERVE_MEM, lock_bufsize (see memcg_run.h)
//
// The tcp_mem and memcg runs also carry "kernel_events": the kernel events
// recorded through tracefs (tools/trace) before the sender's first sample
// below its initial size and its floor, or why none could be (kevents.h).
//
// Exit: 0 ran, 1 a transfer could not be set up or (memcg runs, which
// check the stream) lost or changed bytes, 2 usage, 77 nothing ran.
#include "force_ceiling.h"
#include "kevents.h"
#include "memcg.h"
#include "memcg_run.h"
#include "pressure.h"
#include "transfer.h"

#include <nlohmann/json.hpp>

#include <sys/utsname.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace sockbuf::kcheck;
using json = nlohmann::ordered_json;

namespace
{

struct options {
	transfer_params base;
	int rtt_ms = 0;
	std::vector<std::string> scenarios;
	bool allow_global = false;
	std::string json_path;
	std::string memcg_parent = "/sys/fs/cgroup";
	long long memcg_headroom = 64 << 10;
	// Record kernel events around the pressure runs (tcp_mem, memcg)
	// where tracefs allows: "auto" (default) or "off".
	bool trace = true;
};

json state_json(const sockbuf_state &s)
{
	return {
	    {"sndbuf", s.sndbuf},	  {"rcvbuf", s.rcvbuf},		{"lock", s.lock},
	    {"snd_wscale", s.snd_wscale}, {"rcv_wscale", s.rcv_wscale}, {"tcp_state", s.tcp_state}};
}

json track_json(const socket_track &t)
{
	json j = {
	    {"setup_err", t.setup_err},
	    {"strategy", {{"snd", t.strategy_snd}, {"rcv", t.strategy_rcv}}},
	    {"report_flags", t.report_flags},
	    {"floor", {{"snd", t.floor.snd}, {"rcv", t.floor.rcv}}},
	    {"at_setup", state_json(t.at_setup)},
	    {"start", state_json(t.start)},
	    {"end", state_json(t.end)},
	    {"min", {{"sndbuf", t.min_snd}, {"rcvbuf", t.min_rcv}}},
	    {"max", {{"sndbuf", t.max_snd}, {"rcvbuf", t.max_rcv}}},
	    {"samples", t.samples},
	    {"below_floor_samples", {{"snd", t.below_floor_snd}, {"rcv", t.below_floor_rcv}}},
	    {"below_floor_ms", {{"snd", t.below_floor_ms_snd}, {"rcv", t.below_floor_ms_rcv}}},
	    {"max_sample_gap_ms", t.max_gap_ms},
	    {"dips_snd",
	     {{"count", t.dips_snd.count},
	      {"longest_lower_ms", t.dips_snd.longest_lower_ms},
	      {"longest_upper_ms", t.dips_snd.longest_upper_ms},
	      {"open_at_end", t.dips_snd.open}}},
	    {"restores", t.restores},
	    {"restore_err", t.restore_err},
	    {"min_sndbuf_after_restore", t.min_snd_after_restore},
	    {"peak", {{"sndbuf", t.peak_snd}, {"rcvbuf", t.peak_rcv}}},
	    {"max_fall", {{"sndbuf", t.max_fall_snd}, {"rcvbuf", t.max_fall_rcv}}},
	    {"low_after_peak",
	     {{"sndbuf", t.low_after_peak_snd}, {"rcvbuf", t.low_after_peak_rcv}}},
	    {"drops", {{"sndbuf", t.drops_snd}, {"rcvbuf", t.drops_rcv}}},
	    {"series_ms_snd_rcv", t.series}};
	return j;
}

json errno_json(int err)
{
	return err ? json(std::string(std::strerror(-err))) : json(nullptr);
}

json memcg_json(const memcg_params &p, const memcg_result &r)
{
	const auto &q = r.squeeze;
	const auto &s = r.setup;
	json events = json::object();
	for (const auto &[k, v] : r.events)
		events[k] = v;
	return {{"group", r.group},
		{"headroom", p.headroom},
		{"squeeze",
		 {{"from_ms", q.from_ms},
		  {"until_ms", q.until_ms},
		  {"applied_at_ms", q.applied_at_ms},
		  {"released_at_ms", q.released_at_ms},
		  {"write_ms", q.write_ms},
		  {"current_at_apply", q.current_at_apply},
		  {"sock_at_apply", q.sock_at_apply},
		  {"memory_max", q.max_applied},
		  {"write_err", errno_json(q.write_err)}}},
		{"sock_peak", r.sock_peak},
		{"sock_end", r.sock_end},
		{"events", events},
		{"sender_process",
		 {{"exit", r.sender_exit},
		  {"oom_score_adj_err", errno_json(s.oom_adj_err)},
		  {"mlockall_err", errno_json(s.mlock_err)},
		  {"reserve_mem_usable", (s.probe_features & SOCKBUF_FEAT_RESERVE_MEM) != 0},
		  {"reserve_mem_known", (s.probe_known & SOCKBUF_FEAT_RESERVE_MEM) != 0}}},
		{"unlock_err", errno_json(s.unlock_err)},
		{"reservation",
		 {{"reported", s.reserved},
		  {"reserve_err", errno_json(s.reserve_err)},
		  {"sampled_min", r.reserved_min},
		  {"sampled_max", r.reserved_max},
		  {"zero_samples", r.reserved_zero_samples}}}};
}

json run_memcg(const options &o, const std::string &name, int port)
{
	json j = {{"scenario", name}, {"rtt_ms", o.rtt_ms}};
	memcg_params p;
	p.base = o.base;
	p.base.port = port;
	p.cgroup_parent = o.memcg_parent;
	p.headroom = o.memcg_headroom;
	if (!memcg_arm_from_name(name.substr(6), p.arm)) {
		j["error"] = "unknown memcg arm";
		return j;
	}
	j["arm"] = memcg_arm_name(p.arm);
	if (!o.allow_global) {
		j["skip"] = "global changes not allowed (--allow-global-changes)";
		return j;
	}
	if (!memcg_controls_memory(o.memcg_parent)) {
		j["skip"] = "no cgroup v2 memory controller for the groups under " + o.memcg_parent;
		return j;
	}
	run_events ev(o.trace);
	auto r = run_memcg_transfer(p);
	j["kernel_events"] = ev.finish(r.sender);
	j["memcg"] = memcg_json(p, r);
	if (r.err) {
		j["error"] = r.what + ": " + std::strerror(-r.err);
		return j;
	}
	j["bytes"] = r.received;
	j["seconds"] = r.seconds;
	j["mbytes_per_s"] = r.seconds > 0 ? r.received / r.seconds / 1e6 : 0;
	j["integrity"] = {{"sent", r.sent},
			  {"received", r.received},
			  {"corrupt_at", r.corrupt_at},
			  {"send_err", errno_json(r.send_err)},
			  {"verified", r.sent > 0 && r.sent == r.received && r.corrupt_at < 0}};
	j["sender"] = track_json(r.sender);
	j["receiver"] = track_json(r.receiver);
	if (p.arm == memcg_arm::guard)
		j["guard"] = {{"interval_ms", 10},
			      {"passes", r.guard_passes},
			      {"below", r.guard_below},
			      {"restored", r.guard_restored},
			      {"max_pass_us", r.guard_max_pass_us},
			      {"err", errno_json(r.guard_err)}};
	return j;
}

json run_one(const options &o, const std::string &name, int port)
{
	transfer_params p = o.base;
	p.port = port;
	json j = {{"scenario", name}, {"rtt_ms", o.rtt_ms}};
	const bool squeeze_tcp_mem = name.rfind("tcp_mem", 0) == 0;
	if (name.rfind("memcg_", 0) == 0)
		return run_memcg(o, name, port);
	const bool force = name == "initial_force";
	p.setup = name == "untouched" ? setup::untouched
		  : name == "locked"  ? setup::locked
		  : force	      ? setup::initial_force
				      : setup::initial;
	if (force) {
		// The raw facts first, on sockets of their own.
		j["force_raw"] = force_raw(p.size);
		j["netns_sysctls"] = netns_sysctls(o.allow_global);
	}
	p.restore_floor = name.find("_restore") != std::string::npos;
	if (squeeze_tcp_mem && !o.allow_global) {
		j["skip"] = "global changes not allowed (--allow-global-changes)";
		return j;
	}
	// Squeeze the middle half: growth before it, recovery after it.
	const auto quarter = p.max_time / 4;
	tcp_mem_squeeze squeeze(quarter, 3 * quarter);
	if (squeeze_tcp_mem)
		p.on_tick = [&](std::chrono::milliseconds now) { squeeze.tick(now); };
	// Kernel events around the squeezed runs only: the recorder's
	// setup takes a while under TCG, and nothing shrinks without pressure.
	std::optional<run_events> ev;
	if (squeeze_tcp_mem)
		ev.emplace(o.trace);
	auto r = run_transfer(p);
	squeeze.release();
	if (ev)
		j["kernel_events"] = ev->finish(r.sender);
	if (r.err) {
		j["error"] = std::string(r.what) + ": " + std::strerror(-r.err);
		return j;
	}
	j["bytes"] = r.bytes;
	j["seconds"] = r.seconds;
	j["mbytes_per_s"] = r.seconds > 0 ? r.bytes / r.seconds / 1e6 : 0;
	if (squeeze_tcp_mem) {
		auto arr = [](const std::optional<tcp_mem_t> &v) {
			return v ? json(*v) : json(nullptr);
		};
		j["tcp_mem"] = {{"before", arr(squeeze.before)},
				{"applied", arr(squeeze.applied)},
				{"pages_in_use_at_apply", squeeze.pages_at_apply},
				{"write_failed", squeeze.write_failed}};
	}
	j["sender"] = track_json(r.sender);
	j["receiver"] = track_json(r.receiver);
	if (force) {
		// Did the forced, unlocked sizes survive the transfer?  The
		// sampled minimum against the size, per side.
		const int size = p.size & ~1;
		j["force_held"] = {{"size", size},
				   {"sender_at_setup", r.sender.at_setup.sndbuf},
				   {"receiver_at_setup", r.receiver.at_setup.rcvbuf},
				   {"sender_lock_at_setup", r.sender.at_setup.lock},
				   {"receiver_lock_at_setup", r.receiver.at_setup.lock},
				   {"sender_min", r.sender.min_snd},
				   {"receiver_min", r.receiver.min_rcv},
				   {"sndbuf_kept", r.sender.min_snd >= size},
				   {"rcvbuf_kept", r.receiver.min_rcv >= size}};
	}
	return j;
}

int usage(std::FILE *to, int status)
{
	std::fprintf(
	    to, "usage: sockbuf-kernel-check --server-ns PATH --client-ns PATH --addr IPV4\n"
		"         [--rtt-ms N] [--size BYTES] [--bytes N] [--seconds S]\n"
		"         [--scenarios "
		"untouched,initial,locked,initial_force,tcp_mem,tcp_mem_restore,\n"
		"                      memcg_raw,memcg_initial,memcg_reserve,memcg_lock,memcg]\n"
		"         [--memcg-parent DIR] [--memcg-headroom BYTES]\n"
		"         [--allow-global-changes] [--trace auto|off] [--json PATH]\n");
	return status;
}

bool parse(int argc, char **argv, options &o)
{
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
		if (a == "--server-ns")
			o.base.server_ns = next();
		else if (a == "--client-ns")
			o.base.client_ns = next();
		else if (a == "--addr")
			o.base.server_addr = next();
		else if (a == "--rtt-ms")
			o.rtt_ms = std::stoi(next());
		else if (a == "--size")
			o.base.size = std::stoi(next());
		else if (a == "--bytes")
			o.base.max_bytes = std::stoll(next());
		else if (a == "--seconds")
			o.base.max_time =
			    std::chrono::milliseconds(static_cast<long>(std::stod(next()) * 1000));
		else if (a == "--scenarios") {
			std::stringstream ss(next());
			std::string s;
			while (std::getline(ss, s, ','))
				if (s == "memcg")
					for (const char *arm :
					     {"memcg_raw", "memcg_initial", "memcg_reserve",
					      "memcg_lock", "memcg_guard"})
						o.scenarios.push_back(arm);
				else
					o.scenarios.push_back(s);
		} else if (a == "--allow-global-changes")
			o.allow_global = true;
		else if (a == "--json")
			o.json_path = next();
		else if (a == "--memcg-parent")
			o.memcg_parent = next();
		else if (a == "--trace") {
			std::string v = next();
			if (v != "auto" && v != "off")
				return false;
			o.trace = v == "auto";
		} else if (a == "--memcg-headroom")
			o.memcg_headroom = std::stoll(next());
		else
			return false;
	}
	return !o.base.server_ns.empty() && !o.base.client_ns.empty() &&
	       !o.base.server_addr.empty();
}

} // namespace

int main(int argc, char **argv)
{
	options o;
	if (argc > 1 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")))
		return usage(stdout, 0);
	try {
		if (!parse(argc, argv, o))
			return usage(stderr, 2);
	} catch (const std::exception &) {
		return usage(stderr, 2);
	}
	if (o.scenarios.empty())
		o.scenarios = {"untouched", "initial", "locked"};
	// SIGINT/SIGTERM during a recorded run: take the tracing setup down.
	sockbuf::trace::recorder::install_signal_teardown();
	utsname u{};
	uname(&u);
	json out = {{"tool", "sockbuf-kernel-check"},
		    {"kernel", u.release},
		    {"rtt_ms", o.rtt_ms},
		    {"size", o.base.size},
		    {"runs", json::array()}};
	int status = 77, port = 5201;
	for (const auto &s : o.scenarios) {
		json r = run_one(o, s, port++);
		const bool lost =
		    r.contains("integrity") && !r["integrity"]["verified"].get<bool>();
		if (r.contains("error") || lost)
			status = 1;
		else if (!r.contains("skip") && status == 77)
			status = 0;
		std::fprintf(stderr, "kernel-check: rtt %d ms %s: %s\n", o.rtt_ms, s.c_str(),
			     r.contains("skip")	   ? r["skip"].get<std::string>().c_str()
			     : r.contains("error") ? r["error"].get<std::string>().c_str()
			     : lost		   ? "bytes lost or changed"
						   : "done");
		out["runs"].push_back(std::move(r));
	}
	if (o.json_path.empty()) {
		std::cout << out.dump(1) << '\n';
	} else {
		std::ofstream f(o.json_path);
		f << out.dump(1) << '\n';
	}
	return status;
}
