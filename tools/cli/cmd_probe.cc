// SPDX-License-Identifier: MIT
// sockbuf probe [--json]
#include "cgroup.h"
#include "commands.h"
#include "guard_event_names.h"
#include "text_wrap.h"

#include <sockbuf/sockbuf.hpp>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace sockbuf::cli
{

guard_events probe_guard_events()
{
	guard_events ev;
	const int g = sockbuf_guard_new(SOCKBUF_GUARD_EVENTS);
	if (g < 0) {
		ev.err = g;
		return ev;
	}
	struct sockbuf_guard_event_totals t;
	if (sockbuf_guard_event_stats(g, &t) == 0) {
		ev.err = t.err;
		ev.attached = sockbuf::guard_events::attached_functions(t.attached, ", ");
	}
	sockbuf_guard_destroy(g);
	return ev;
}

namespace
{

constexpr uint32_t all_features[] = {SOCKBUF_FEAT_BUF_LOCK, SOCKBUF_FEAT_RCVLOWAT_RAISE,
				     SOCKBUF_FEAT_RESERVE_MEM, SOCKBUF_FEAT_FORCE,
				     SOCKBUF_FEAT_TCP_INFO};

const char *feature_key(uint32_t f)
{
	switch (f) {
	case SOCKBUF_FEAT_BUF_LOCK:
		return "buf_lock";
	case SOCKBUF_FEAT_RCVLOWAT_RAISE:
		return "rcvlowat_raise";
	case SOCKBUF_FEAT_RESERVE_MEM:
		return "reserve_mem";
	case SOCKBUF_FEAT_FORCE:
		return "bufforce";
	default:
		return "tcp_info";
	}
}

const char *verdict(const sockbuf_probe_info &p, uint32_t f)
{
	if (p.features & f)
		return "yes";
	return (p.known & f) ? "known, not usable here" : "no";
}

// What the reserve state means, and what the caller can do about it.
struct reserve_advice {
	const char *why;
	const char *fix; // nullptr: nothing to do
};

reserve_advice advice(int state)
{
	switch (state) {
	case SOCKBUF_RESERVE_USABLE:
		return {"this process's sockets are charged to its memory cgroup: "
			"SOCKBUF_F_RESERVE_MEM will reserve the floor.",
			nullptr};
	case SOCKBUF_RESERVE_NO_OPTION:
		return {"the kernel has no SO_RESERVE_MEM (it came in Linux 5.16).",
			"use a 5.16 or later kernel; until then the floor guard (or a locked "
			"buffer) is the only protection against send-side moderation."};
	case SOCKBUF_RESERVE_ROOT_CGROUP:
		return {"the process is in the root memory cgroup, whose sockets are never "
			"charged.",
			"run it in a child cgroup with the memory controller: on cgroup v2, "
			"'systemd-run --scope -p MemoryAccounting=yes CMD', or as root make a "
			"child cgroup, enable +memory in the parent's cgroup.subtree_control "
			"and move the process into it."};
	case SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING:
		return {"the memory controller is on a cgroup v1 hierarchy, where sockets are "
			"charged only once TCP accounting is switched on for the cgroup.",
			"as root, write a limit (even a large one) to the cgroup's "
			"memory.kmem.tcp.limit_in_bytes before the sockets are made, or boot "
			"with cgroup v2 (systemd.unified_cgroup_hierarchy=1)."};
	case SOCKBUF_RESERVE_NOSOCKET:
		return {"the kernel was booted with cgroup.memory=nosocket: no socket is "
			"charged to a memory cgroup.",
			"remove cgroup.memory=nosocket from the kernel command line."};
	case SOCKBUF_RESERVE_NO_MEMORY_CONTROLLER:
		return {"the memory controller is not enabled for the process's cgroup (it is "
			"not in its cgroup.controllers), or the kernel has none.",
			"enable +memory in the parent's cgroup.subtree_control (as root), or run "
			"under 'systemd-run --scope -p MemoryAccounting=yes CMD'."};
	default:
		return {"the kernel refused SO_RESERVE_MEM for a reason the cgroup files do "
			"not show.",
			"check that the process's memory cgroup is not the root one and that "
			"socket accounting is on (see sockbuf_probe(3))."};
	}
}

// The process's cgroup as the reason speaks of it: "v1 memory /a/b".
std::string cgroup_text(const cgroup::facts &cg)
{
	if (cg.member.v1_memory)
		return fmt::format("v1 memory:{}", cg.member.v1_path);
	if (cg.member.v2)
		return fmt::format("v2 {}", cg.member.v2_path);
	return "unknown";
}

void print_reserve(const sockbuf_probe_info &p, const cgroup::facts &cg)
{
	fmt::print("\nSO_RESERVE_MEM for this process: {} ({})\n",
		   p.reserve_state == SOCKBUF_RESERVE_USABLE ? "usable" : "not usable",
		   sockbuf_reserve_state_name(p.reserve_state));
	fmt::print("{}", text::wrap(cgroup_text(cg), "  cgroup: ", "    "));
	char dir[cgroup::max_path];
	if (cgroup::memory_cgroup_dir(cg, dir, sizeof(dir)))
		fmt::print("{}", text::wrap(dir, "  directory: ", "    "));
	const reserve_advice a = advice(p.reserve_state);
	fmt::print("{}", text::wrap(a.why, "  why: ", "    "));
	if (a.fix)
		fmt::print("{}", text::wrap(a.fix, "  to use it: ", "    "));
}

void print_guard_events(const guard_events &ev)
{
	const std::string what =
	    ev.err == 0 ? fmt::format("yes (fexit on {})", ev.attached)
			: fmt::format("no, the guard polls ({})", std::strerror(-ev.err));
	fmt::print("\n{}", text::wrap(what, "floor guard events for this process: ", "  "));
}

void print_json(const sockbuf_probe_info &p, const cgroup::facts &cg)
{
	nlohmann::ordered_json j;
	j["kernel"] = p.release;
	j["library_version"] = sockbuf_version();
	for (uint32_t f : all_features)
		j["features"][feature_key(f)] = {{"usable", (p.features & f) != 0},
						 {"known", (p.known & f) != 0}};
	// Sizes in the unit the kernel stores and getsockopt() returns.
	j["limits"] = {{"sndbuf_max", p.sndbuf_max}, {"rcvbuf_max", p.rcvbuf_max}};
	j["sysctl"] = {{"wmem_default", p.wmem_default},
		       {"rmem_default", p.rmem_default},
		       {"tcp_wmem", {p.tcp_wmem[0], p.tcp_wmem[1], p.tcp_wmem[2]}},
		       {"tcp_rmem", {p.tcp_rmem[0], p.tcp_rmem[1], p.tcp_rmem[2]}}};
	j["quirks"] = {
	    {"rcvbuf_clamps_window", (p.quirks & SOCKBUF_QUIRK_RCVBUF_CLAMPS_WINDOW) != 0}};
	const reserve_advice a = advice(p.reserve_state);
	j["reserve_mem"] = {{"usable", p.reserve_state == SOCKBUF_RESERVE_USABLE},
			    {"state", sockbuf_reserve_state_name(p.reserve_state)},
			    {"cgroup", cgroup_text(cg)},
			    {"why", a.why},
			    {"fix", a.fix ? a.fix : ""}};
	j["min_sndbuf"] = p.min_sndbuf;
	j["min_rcvbuf"] = p.min_rcvbuf;
	j["tcp_socket_defaults"] = {{"sndbuf", p.tcp_sndbuf}, {"rcvbuf", p.tcp_rcvbuf}};
	const guard_events ev = probe_guard_events();
	j["guard_events"] = {{"usable", ev.err == 0},
			     {"error", ev.err == 0 ? "" : std::strerror(-ev.err)},
			     {"attached", ev.attached}};
	fmt::print("{}\n", j.dump(2));
}

void print_table(const sockbuf_probe_info &p, const cgroup::facts &cg)
{
	fmt::print("kernel {}\n\n", p.release);
	fmt::print("{:<30} {}\n", "mechanism", "available");
	for (uint32_t f : all_features)
		fmt::print("{:<30} {}\n", sockbuf_feature_name(f), verdict(p, f));
	fmt::print("{:<30} {}\n", "SO_RCVBUF leaves window clamp",
		   (p.quirks & SOCKBUF_QUIRK_RCVBUF_CLAMPS_WINDOW) ? "yes (reset by the library)"
								   : "no");
	fmt::print("\n{:<30} {}\n", "limit", "bytes");
	fmt::print("{:<30} {}\n", "sndbuf max (2 x wmem_max)", p.sndbuf_max);
	fmt::print("{:<30} {}\n", "rcvbuf max (2 x rmem_max)", p.rcvbuf_max);
	fmt::print("{:<30} {} {} {}\n", "net.ipv4.tcp_wmem", p.tcp_wmem[0], p.tcp_wmem[1],
		   p.tcp_wmem[2]);
	fmt::print("{:<30} {} {} {}\n", "net.ipv4.tcp_rmem", p.tcp_rmem[0], p.tcp_rmem[1],
		   p.tcp_rmem[2]);
	fmt::print("{:<30} {} / {}\n", "smallest sndbuf / rcvbuf", p.min_sndbuf, p.min_rcvbuf);
	fmt::print("{:<30} {} / {}\n", "new TCP socket sndbuf / rcvbuf", p.tcp_sndbuf,
		   p.tcp_rcvbuf);
	const char *how = (p.features & SOCKBUF_FEAT_BUF_LOCK)
			      ? "SO_*BUF then SO_BUF_LOCK 0 (both directions)"
			  : (p.features & SOCKBUF_FEAT_RCVLOWAT_RAISE)
			      ? "receive: SO_RCVLOWAT raise; send: fallback flag needed"
			      : "no unlocked mechanism: fallback flag needed";
	fmt::print("\n{}", text::wrap(how, "set_initial_bufsize will use: ", "  "));
	print_reserve(p, cg);
	print_guard_events(probe_guard_events());
}

} // namespace

int cmd_probe(int argc, char **argv)
{
	bool json = false;
	for (int i = 1; i < argc; i++) {
		if (!std::strcmp(argv[i], "--json")) {
			json = true;
		} else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
			fmt::print(
			    "usage: sockbuf probe [--json]\n"
			    "\n"
			    "Which buffer mechanisms this kernel offers (SO_BUF_LOCK, SO_RCVLOWAT\n"
			    "raise, SO_RESERVE_MEM, SO_*BUFFORCE, TCP_INFO), the limits, a fresh\n"
			    "socket's sizes, the mechanism set_initial_bufsize uses here, whether\n"
			    "this cgroup allows SO_RESERVE_MEM, and whether a floor guard gets\n"
			    "events.  --json: one JSON object.\n"
			    "\n"
			    "Exit status: 0, 1 the probe failed, 2 usage.\n");
			return 0;
		} else {
			fmt::print(stderr,
				   "sockbuf probe: unknown argument '{}'\n"
				   "usage: sockbuf probe [--json]\n",
				   argv[i]);
			return 2;
		}
	}
	auto p = sockbuf::probe(true);
	if (!p) {
		fmt::print(stderr, "sockbuf probe: {}\n", p.error().message());
		return 1;
	}
	cgroup::facts f;
	cgroup::read_system(&f);
	if (json)
		print_json(*p, f);
	else
		print_table(*p, f);
	return 0;
}

} // namespace sockbuf::cli
