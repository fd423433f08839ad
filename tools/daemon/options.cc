// SPDX-License-Identifier: MIT
#include "options.h"

#include "version.h"

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>

namespace sockbuf::daemon
{

namespace
{

constexpr const char *usage_text =
    "usage: sockbufd [--metrics-file PATH] [--metrics-listen ADDR:PORT]\n"
    "                [--interval MS] [--net-interval MS] [--reread MS]\n"
    "                [--events on|off] [--max-services N]\n"
    "\n"
    "Keeps the buffer floors every process on this host publishes (the\n"
    "sockbuf library's guard, `sockbuf run`): a socket cut below its floor\n"
    "is raised back with the rights of the process that owns it.\n"
    "\n"
    "  --metrics-file PATH        write Prometheus text format there every second\n"
    "                             (node_exporter textfile; written atomically)\n"
    "  --metrics-listen ADDR:PORT serve /metrics there (e.g. 127.0.0.1:9611,\n"
    "                             [::1]:9611)\n"
    "  --events on|off            wake on the kernel's cuts: one BPF program set\n"
    "                             for the host (default on; polls where it does\n"
    "                             not load)\n"
    "  --interval MS              polling: a pass over the guarded sockets\n"
    "                             (default 100); with events, the shortest time\n"
    "                             between passes for new sockets\n"
    "  --net-interval MS          every floor table read whole, and with events\n"
    "                             a full pass (the safety net), at least this\n"
    "                             often (default 60000)\n"
    "  --reread MS                a table that changed read again at most this\n"
    "                             often (default 100)\n"
    "  --max-services N           services (process name and unit) with series\n"
    "                             of their own at most (default 1000); the rest\n"
    "                             are counted under comm=\"(other)\"\n"
    "  --version, --help\n";

// @text as milliseconds in [1, 3600000], or false.
bool parse_ms(const char *text, unsigned *out)
{
	char *end = nullptr;
	errno = 0;
	const long long v = std::strtoll(text, &end, 10);
	if (errno || end == text || *end || v < 1 || v > 3600000)
		return false;
	*out = unsigned(v);
	return true;
}

// ADDR:PORT with a port in 1-65535 and something before the colon.
bool valid_listen(const std::string &s)
{
	const size_t colon = s.rfind(':');
	if (colon == std::string::npos || colon == 0 || colon + 1 >= s.size())
		return false;
	char *end = nullptr;
	const long port = std::strtol(s.c_str() + colon + 1, &end, 10);
	return *end == '\0' && port >= 1 && port <= 65535;
}

int bad(const char *what, const char *value, const char *expected)
{
	fmt::print(stderr, "sockbufd: {} '{}': {}\n", what, value, expected);
	return 2;
}

} // namespace

int parse_options(int argc, char **argv, options *out)
{
	static const struct option longs[] = {
	    {"metrics-file", required_argument, nullptr, 'f'},
	    {"metrics-listen", required_argument, nullptr, 'l'},
	    {"interval", required_argument, nullptr, 'i'},
	    {"net-interval", required_argument, nullptr, 'n'},
	    {"reread", required_argument, nullptr, 'r'},
	    {"events", required_argument, nullptr, 'e'},
	    {"max-services", required_argument, nullptr, 's'},
	    {"help", no_argument, nullptr, 'h'},
	    {"version", no_argument, nullptr, 'V'},
	    {nullptr, 0, nullptr, 0},
	};
	opterr = 0;
	optind = 1;
	for (;;) {
		const int at = optind;
		const int c = getopt_long(argc, argv, "+", longs, nullptr);
		if (c == -1)
			break;
		switch (c) {
		case 'f':
			if (!*optarg)
				return bad("--metrics-file", optarg, "needs a path");
			out->metrics_file = optarg;
			break;
		case 'l':
			if (!valid_listen(optarg))
				return bad("--metrics-listen", optarg,
					   "want ADDR:PORT, e.g. 127.0.0.1:9611");
			out->metrics_listen = optarg;
			break;
		case 'i':
			if (!parse_ms(optarg, &out->interval_ms))
				return bad("--interval", optarg, "want milliseconds, 1-3600000");
			break;
		case 'n':
			if (!parse_ms(optarg, &out->net_ms))
				return bad("--net-interval", optarg,
					   "want milliseconds, 1-3600000");
			break;
		case 'r':
			if (!parse_ms(optarg, &out->reread_ms))
				return bad("--reread", optarg, "want milliseconds, 1-3600000");
			break;
		case 'e':
			if (std::strcmp(optarg, "on") != 0 && std::strcmp(optarg, "off") != 0)
				return bad("--events", optarg, "want on or off");
			out->events = std::strcmp(optarg, "on") == 0;
			break;
		case 's':
			if (!parse_ms(optarg, &out->max_services) || out->max_services > 1000000)
				return bad("--max-services", optarg, "want a number, 1-1000000");
			break;
		case 'h':
			fmt::print("{}", usage_text);
			return 1;
		case 'V':
			fmt::print("{}\n", release::version_line("sockbufd"));
			return 1;
		default: {
			const char *arg = at < argc ? argv[at] : "?";
			if (optopt && std::strchr("flinres", optopt))
				fmt::print(stderr, "sockbufd: {} needs a value\n", arg);
			else
				fmt::print(stderr, "sockbufd: unknown option '{}'\n", arg);
			fmt::print(stderr, "{}", usage_text);
			return 2;
		}
		}
	}
	if (optind < argc) {
		fmt::print(stderr, "sockbufd: unexpected argument '{}'\n{}", argv[optind],
			   usage_text);
		return 2;
	}
	return 0;
}

} // namespace sockbuf::daemon
