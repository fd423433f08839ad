// SPDX-License-Identifier: MIT
// sockbuf probe [--json]
#include "commands.h"
#include "text_wrap.h"

#include <sockbuf/sockbuf.hpp>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cstring>

namespace sockbuf::cli
{

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

void print_json(const sockbuf_probe_info &p)
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
	j["min_sndbuf"] = p.min_sndbuf;
	j["min_rcvbuf"] = p.min_rcvbuf;
	j["tcp_socket_defaults"] = {{"sndbuf", p.tcp_sndbuf}, {"rcvbuf", p.tcp_rcvbuf}};
	fmt::print("{}\n", j.dump(2));
}

void print_table(const sockbuf_probe_info &p)
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
}

} // namespace

int cmd_probe(int argc, char **argv)
{
	bool json = false;
	for (int i = 1; i < argc; i++) {
		if (!std::strcmp(argv[i], "--json")) {
			json = true;
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
	if (json)
		print_json(*p);
	else
		print_table(*p);
	return 0;
}

} // namespace sockbuf::cli
