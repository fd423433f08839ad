// SPDX-License-Identifier: MIT
#include "attribution.h"
#include "event_json.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>

namespace sockbuf::contract
{

namespace
{

constexpr size_t max_events = 4;

std::string join(const std::vector<std::string> &v)
{
	std::string out;
	for (const auto &s : v)
		out += (out.empty() ? "" : ", ") + s;
	return out;
}

json attribute_one(const json &viol, const json &scenario, const std::vector<trace::event> &events,
		   const trace_run &run)
{
	json k = {{"found", false}};
	if (!run.active) {
		k["reason"] = run.reason;
		return k;
	}
	int64_t t0 = scenario.value("t0_mono_ns", int64_t(0));
	if (t0 == 0) {
		k["reason"] = "the scenario's start time was not recorded";
		return k;
	}
	double t_ms = viol["t_ms"].get<double>();
	// A violation without a time is an end-of-run reading.
	int64_t t_v =
	    t0 + int64_t((t_ms >= 0 ? t_ms : scenario["seconds"].get<double>() * 1e3) * 1e6);
	int sport = -1, dport = -1;
	std::string sock = viol["socket"].get<std::string>();
	if (scenario.contains("socket_ports") && scenario["socket_ports"].contains(sock)) {
		sport = scenario["socket_ports"][sock][0].get<int>();
		dport = scenario["socket_ports"][sock][1].get<int>();
	}
	const trace::nearest_events near =
	    trace::nearest_before(events, t_v, -1, sport, dport, attribution_window_ns, max_events);
	json list = json::array();
	for (const auto *e : near.same)
		list.push_back(trace::event_json(*e, t0, t_v, "socket"));
	for (const auto *e : near.window)
		list.push_back(trace::event_json(*e, t0, t_v, "window"));
	if (!list.empty()) {
		k["found"] = true;
		k["events"] = list;
		return k;
	}
	std::string why =
	    fmt::format("none recorded in the window: no event on this socket ({}) before it, none "
			"naming no socket in the {:.0f} ms before it (enabled: {})",
			sport > 0 ? fmt::format("ports {}->{}", sport, dport) : "ports unknown",
			double(attribution_window_ns) / 1e6, join(run.enabled));
	if (run.dropped)
		why += fmt::format("; the trace buffer dropped {} events", run.dropped);
	k["reason"] = why;
	return k;
}

// "allocated=2870 (pages, above tcp_mem max 2866)" when both are there.
std::string memory_text(const json &f)
{
	std::vector<std::string> parts;
	if (f.contains("allocated")) {
		std::string a = f["allocated"].get<std::string>();
		std::string s = "allocated=" + a;
		if (f.contains("sysctl_mem")) {
			std::string m = f["sysctl_mem"].get<std::string>();
			long lim[3] = {-1, -1, -1};
			const char *p = m.c_str();
			for (long &l : lim) {
				char *end = nullptr;
				l = std::strtol(p, &end, 10);
				p = *end == ',' ? end + 1 : end;
			}
			long al = std::strtol(a.c_str(), nullptr, 10);
			const char *where = al > lim[2]	  ? "above max"
					    : al > lim[1] ? "above pressure"
					    : al > lim[0] ? "above min"
							  : "below min";
			s += fmt::format(" pages ({} of sysctl_mem={})", where, m);
		}
		parts.push_back(s);
	}
	for (const char *key : {"wmem_queued", "wmem_alloc", "sysctl_wmem", "rmem_alloc",
				"sysctl_rmem", "kind", "newstate"})
		if (f.contains(key))
			parts.push_back(fmt::format("{}={}", key, f[key].get<std::string>()));
	return join(parts);
}

} // namespace

void attribute_c3(json *scenario, const std::vector<trace::event> &events, const trace_run &run)
{
	if (!scenario->contains("verdicts"))
		return;
	for (auto &v : (*scenario)["verdicts"]) {
		if (v["clause"] != "C3")
			continue;
		for (const char *side : {"raw", "library"})
			for (auto &viol : v[side]["violations"])
				viol["kernel_events"] = attribute_one(viol, *scenario, events, run);
	}
}

std::string kernel_events_text(const json &violation)
{
	if (!violation.contains("kernel_events"))
		return "";
	const json &k = violation["kernel_events"];
	if (!k["found"].get<bool>())
		return "kernel events: none (" + k["reason"].get<std::string>() + ")";
	std::vector<std::string> out;
	for (const auto &e : k["events"]) {
		std::string who =
		    e["match"] == "socket"
			? fmt::format("this socket{}",
				      e.contains("sk") ? " sk=" + e["sk"].get<std::string>() : "")
			: "a socket it does not name";
		std::string mem = memory_text(e["fields"]);
		out.push_back(
		    fmt::format("{} {:.3f} ms before ({}){}", e["name"].get<std::string>(),
				e["before_ms"].get<double>(), who, mem.empty() ? "" : ": " + mem));
	}
	std::string s = "kernel events: ";
	for (size_t i = 0; i < out.size(); i++)
		s += (i ? "; " : "") + out[i];
	return s;
}

std::string violation_memory_text(const json &violation)
{
	if (!violation.contains("memory"))
		return "";
	const json &m = violation["memory"];
	return fmt::format("memory at the first inet_diag sample under the floor ({:.1f} ms): "
			   "sndbuf {}, rcvbuf {}, wmem_queued {}, rmem_alloc {}, fwd_alloc {}",
			   m["t_ms"].get<double>(), m["sndbuf"].get<int64_t>(),
			   m["rcvbuf"].get<int64_t>(), m["wmem_queued"].get<int64_t>(),
			   m["rmem_alloc"].get<int64_t>(), m["fwd_alloc"].get<int64_t>());
}

} // namespace sockbuf::contract
