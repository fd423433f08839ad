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
//   tcp_mem      set_initial sender, net.ipv4.tcp_mem lowered under the
//                memory in use mid-transfer             (raw, global change)
//   tcp_mem_restore  same, with sockbuf_restore_floor on every sample
//   memcg, memcg_restore  same squeeze from the cgroup's memory.max
//
// Exit: 0 ran, 1 a transfer could not be set up, 2 usage, 77 nothing ran.
#include "pressure.h"
#include "transfer.h"

#include <nlohmann/json.hpp>

#include <sys/utsname.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
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

json run_one(const options &o, const std::string &name, int port)
{
	transfer_params p = o.base;
	p.port = port;
	json j = {{"scenario", name}, {"rtt_ms", o.rtt_ms}};
	const bool squeeze_tcp_mem = name.rfind("tcp_mem", 0) == 0;
	const bool memcg = name.rfind("memcg", 0) == 0;
	p.setup = name == "untouched" ? setup::untouched
		  : name == "locked"  ? setup::locked
				      : setup::initial;
	p.restore_floor = name.find("_restore") != std::string::npos;
	if ((squeeze_tcp_mem || memcg) && !o.allow_global) {
		j["skip"] = "global changes not allowed (--allow-global-changes)";
		return j;
	}
	if (memcg) {
		long long lim = own_memcg_limit();
		if (lim < 0) {
			j["skip"] = "not in a cgroup v2 with memory.max set";
			return j;
		}
		j["memcg_limit"] = lim;
	}
	// Squeeze the middle half: growth before it, recovery after it.
	const auto quarter = p.max_time / 4;
	tcp_mem_squeeze squeeze(quarter, 3 * quarter);
	if (squeeze_tcp_mem)
		p.on_tick = [&](std::chrono::milliseconds now) { squeeze.tick(now); };
	auto r = run_transfer(p);
	squeeze.release();
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
	return j;
}

int usage(std::FILE *to, int status)
{
	std::fprintf(to,
		     "usage: sockbuf-kernel-check --server-ns PATH --client-ns PATH --addr IPV4\n"
		     "         [--rtt-ms N] [--size BYTES] [--bytes N] [--seconds S]\n"
		     "         [--scenarios untouched,initial,locked,tcp_mem,tcp_mem_restore,\n"
		     "                      memcg,memcg_restore]\n"
		     "         [--allow-global-changes] [--json PATH]\n");
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
				o.scenarios.push_back(s);
		} else if (a == "--allow-global-changes")
			o.allow_global = true;
		else if (a == "--json")
			o.json_path = next();
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
		if (r.contains("error"))
			status = 1;
		else if (!r.contains("skip") && status == 77)
			status = 0;
		std::fprintf(stderr, "kernel-check: rtt %d ms %s: %s\n", o.rtt_ms, s.c_str(),
			     r.contains("skip")	   ? r["skip"].get<std::string>().c_str()
			     : r.contains("error") ? r["error"].get<std::string>().c_str()
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
