// SPDX-License-Identifier: MIT
// sockbuf show PID|--all [--json]: a process's TCP sockets, their buffers
// and lock bits as the kernel sees them, the floors the process published,
// and what is wrong with them.  sockbuf show PID --watch MS: the buffers
// that fall below their floors, sampled every MS milliseconds.
#include "commands.h"

#include "show_check.h"
#include "show_collect.h"
#include "show_diagnose.h"
#include "show_trace.h"
#include "show_watch.h"
#include "text_wrap.h"

#include "daemon_presence.h"
#include "daemon_progress.h"
#include "floor_read.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <netinet/tcp.h>
#include <string_view>
#include <unistd.h>

namespace sockbuf::cli
{

namespace
{

using show::collection;
using show::shown_socket;

int show_usage(std::FILE *to, int status)
{
	fmt::print(to,
		   "usage: sockbuf show PID...|--all [--json|--check]\n"
		   "       sockbuf show PID --watch MS [--count N] [--trace auto|on|off]\n"
		   "\n"
		   "Every TCP socket of each process PID (or of every process in this network\n"
		   "namespace): state, addresses, sk_sndbuf/sk_rcvbuf, lock bits (read from\n"
		   "a pidfd_getfd duplicate; needs ptrace access), memory in use, RTT,\n"
		   "window scales, the floors the process published (floor guard, shim),\n"
		   "and a diagnosis; a socket systemd passed is named with its socket\n"
		   "unit.  KB = 1024 bytes.\n"
		   "\n"
		   "--check     a host check: prints nothing and exits 0 when no socket is\n"
		   "            locked or below its floor; else one line each, exit 3\n"
		   "--watch MS  sample every MS milliseconds ({}..{}) and report buffers\n"
		   "            that drop below their floor or come back, until PID exits;\n"
		   "            a summary at the end\n"
		   "--count N   stop after N samples\n"
		   "--trace M   with --watch: record the kernel's own events (tracefs:\n"
		   "            sock tracepoints, kprobes on the shrink paths) and print\n"
		   "            those on the dropped socket before each drop; auto (the\n"
		   "            default) when root, on: exit 1 when it cannot\n"
		   "\n"
		   "Exit status: 0, 1 error (a PID that cannot be read), 2 usage, 3 some\n"
		   "buffer below its floor (--check: or locked).\n",
		   show::watch_min_ms, show::watch_max_ms);
	return status;
}

struct summary {
	int with_floor = 0, below = 0;
};

summary summarize(const collection &c)
{
	summary sum;
	for (const auto &s : c.sockets) {
		sum.with_floor += s.floor_snd > 0 || s.floor_rcv > 0;
		sum.below += show::below_floor(s);
	}
	return sum;
}

nlohmann::ordered_json lock_json(const shown_socket &s)
{
	if (s.lock < 0)
		return "unknown";
	return {{"snd", (s.lock & 1) != 0}, {"rcv", (s.lock & 2) != 0}};
}

// Who keeps a socket's floor now, and how late at most it sees a cut by
// memory pressure and one by setsockopt (microseconds; 0: at once, by
// event programs; -1: not said).
struct held {
	const char *by = "none";
	int64_t mem_us = -1, set_us = -1;
	int daemon = 0; // sockbufd's pid when by is "daemon" and known
};

// What sockbufd's progress file says it keeps (read once), or nothing.
const progress::reading *daemon_progress()
{
	static bool read = false;
	static progress::reading r;
	static bool ok = false;
	if (!read) {
		read = true;
		const int fd = progress::open_file();
		if (fd >= 0) {
			int err = progress::read(fd, &r);
			if (err == -EAGAIN)
				err = progress::read(fd, &r); // caught mid-rewrite
			ok = err == 0;
			::close(fd);
		}
	}
	return ok ? &r : nullptr;
}

// sockbufd (which serves every floor published in its network namespace;
// a process's own guard stands down for it only where it keeps the
// guard's bound), the process's own guard (its bound as it said in its
// table; a library before 0.6 says none), or nobody (a floor published
// with neither, or no floor).
held held_of(const shown_socket &s)
{
	held h;
	if (s.floor_snd <= 0 && s.floor_rcv <= 0)
		return h;
	static std::map<int, bool> daemon_for;
	auto it = daemon_for.find(s.pid);
	if (it == daemon_for.end())
		it = daemon_for.emplace(s.pid, sockbuf::presence::serves(s.pid)).first;
	const bool daemon = it->second;
	const bool guard = s.guard_set_us || (s.floor_by & registry::by_guard);
	if (daemon && (!s.guard_set_us || s.guard_served_by)) {
		h.by = "daemon";
		h.daemon = s.guard_served_by;
		if (const progress::reading *r = daemon_progress()) {
			h.mem_us = r->b.mem_us;
			h.set_us = r->b.set_us;
		}
	} else if (guard) {
		h.by = "guard";
		if (s.guard_set_us) {
			h.mem_us = s.guard_mem_us;
			h.set_us = s.guard_set_us == registry::guard_at_once ? 0 : s.guard_set_us;
		}
	}
	return h;
}

const char *served_by(const shown_socket &s)
{
	return held_of(s).by;
}

// "within 20 ms", "at once" (event programs), "within ? ms".
std::string within(int64_t us)
{
	if (us < 0)
		return "within a bound not said";
	if (us == 0)
		return "at once";
	return fmt::format("within {:g} ms", double(us) / 1000.0);
}

std::string held_text(const held &h)
{
	std::string who = std::string_view(h.by) == "daemon"
			      ? (h.daemon ? fmt::format("sockbufd (pid {})", h.daemon) : "sockbufd")
			      : "the process's guard";
	if (h.mem_us == h.set_us)
		return fmt::format("held by {}: cuts back {}", who, within(h.mem_us));
	return fmt::format("held by {}: cuts by memory pressure back {}, by setsockopt {}", who,
			   within(h.mem_us), within(h.set_us));
}

nlohmann::ordered_json socket_json(const shown_socket &s, const show::net_limits &limits)
{
	const auto &si = s.info;
	show::diagnosis d = show::diagnose(s, limits);
	nlohmann::ordered_json j;
	j["pid"] = s.pid;
	j["fd"] = s.fd;
	j["state"] = diag::state_name(si.state);
	j["local"] = si.local.str();
	j["remote"] = si.remote.str();
	j["inode"] = si.inode;
	j["cookie"] = si.cookie;
	j["sndbuf"] = si.sndbuf;
	j["rcvbuf"] = si.rcvbuf;
	j["lock"] = lock_json(s);
	j["lock_bits"] = s.lock;
	if (s.lock < 0)
		j["lock_note"] = s.lock_note;
	j["memory"] = {{"rmem_alloc", si.rmem_alloc},
		       {"wmem_alloc", si.wmem_alloc},
		       {"wmem_queued", si.wmem_queued},
		       {"fwd_alloc", si.fwd_alloc},
		       {"drops", si.drops}};
	if (si.has_tcp_info)
		j["tcp_info"] = {{"rtt_us", si.rtt_us},
				 {"rttvar_us", si.rttvar_us},
				 {"snd_wscale", si.snd_wscale},
				 {"rcv_wscale", si.rcv_wscale},
				 {"snd_cwnd", si.snd_cwnd},
				 {"bytes_acked", si.bytes_acked},
				 {"bytes_received", si.bytes_received}};
	if (s.floor_snd > 0 || s.floor_rcv > 0) {
		j["floor"] = {{"snd", s.floor_snd},
			      {"rcv", s.floor_rcv},
			      {"by", show::floor_by_text(s.floor_by)}};
		j["below_floor"] = {{"snd", show::floor_depth(s, SOCKBUF_SND)},
				    {"rcv", show::floor_depth(s, SOCKBUF_RCV)}};
	}
	j["served_by"] = served_by(s);
	if (!s.systemd_unit.empty())
		j["systemd_unit"] = s.systemd_unit;
	if (!s.systemd_note.empty())
		d.lines.push_back(s.systemd_note);
	if (s.floor_snd > 0 || s.floor_rcv > 0) {
		const held h = held_of(s);
		const auto us = [](int64_t v) {
			return v < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
		};
		j["held"] = {
		    {"by", h.by}, {"pressure_us", us(h.mem_us)}, {"setsockopt_us", us(h.set_us)}};
	}
	j["problem"] = d.problem;
	j["diagnosis"] = d.lines;
	return j;
}

void print_json(const collection &c, int pid, const std::vector<int> &pids)
{
	nlohmann::ordered_json j;
	if (pid > 0)
		j["pid"] = pid;
	else if (pids.size() > 1)
		j["pids"] = pids;
	j["limits"] = {{"rcvbuf_max", c.limits.rcvbuf_max},
		       {"sndbuf_max", c.limits.sndbuf_max},
		       {"tcp_rmem", c.limits.tcp_rmem},
		       {"tcp_wmem", c.limits.tcp_wmem}};
	j["notes"] = c.notes;
	j["sockets"] = nlohmann::ordered_json::array();
	for (const auto &s : c.sockets)
		j["sockets"].push_back(socket_json(s, c.limits));
	const summary sum = summarize(c);
	j["summary"] = {{"sockets", c.sockets.size()},
			{"with_floor", sum.with_floor},
			{"below_floor", sum.below}};
	fmt::print("{}\n", j.dump(2));
}

std::string lock_text(const shown_socket &s)
{
	if (s.lock < 0)
		return "unknown";
	if (s.lock == 0)
		return "none";
	if (s.lock == 3)
		return "snd+rcv";
	return (s.lock & 1) ? "snd" : "rcv";
}

// Where systemd passed the socket from (socket activation), and what its
// unit did to it.
void print_systemd(const shown_socket &s)
{
	if (!s.systemd_note.empty())
		fmt::print("{}", text::wrap(s.systemd_note, "  - ", "    "));
	else if (!s.systemd_unit.empty())
		fmt::print("  passed by systemd from {}\n", s.systemd_unit);
}

void print_text(const collection &c)
{
	// Every line fits 80 columns: fixed fields split over lines, sentences
	// wrapped.
	fmt::print(
	    "limits: rcvbuf_max {} sndbuf_max {}\n        tcp_rmem {} {} {}  tcp_wmem {} {} {}\n",
	    c.limits.rcvbuf_max, c.limits.sndbuf_max, c.limits.tcp_rmem[0], c.limits.tcp_rmem[1],
	    c.limits.tcp_rmem[2], c.limits.tcp_wmem[0], c.limits.tcp_wmem[1], c.limits.tcp_wmem[2]);
	for (const auto &n : c.notes)
		fmt::print("{}", text::wrap(n, "note: ", "      "));
	if (c.sockets.empty())
		fmt::print("no TCP sockets\n");
	for (const auto &s : c.sockets) {
		const auto &si = s.info;
		// IPv6 endpoints make the address pair long: it goes on a line of
		// its own when it does not fit.
		std::string head =
		    fmt::format("pid {} fd {}  {}", s.pid, s.fd, diag::state_name(si.state));
		std::string ends = fmt::format("{} -> {}", si.local.str(), si.remote.str());
		if (head.size() + 2 + ends.size() <= text::terminal_width)
			fmt::print("\n{}  {}\n", head, ends);
		else
			fmt::print("\n{}\n{}", head, text::wrap(ends, "  ", "     "));
		fmt::print("  sndbuf {}  rcvbuf {}  lock {}\n  in use: rmem {}  wmem_queued {}\n",
			   si.sndbuf, si.rcvbuf, lock_text(s), si.rmem_alloc, si.wmem_queued);
		if (si.has_tcp_info && si.state != TCP_LISTEN)
			fmt::print("  rtt {:.3f} ms  wscale snd {} rcv {}\n", si.rtt_us / 1000.0,
				   si.snd_wscale, si.rcv_wscale);
		if (s.floor_snd > 0 || s.floor_rcv > 0)
			fmt::print("  floor snd {} rcv {} (by the {}{})\n", s.floor_snd,
				   s.floor_rcv, show::floor_by_text(s.floor_by),
				   std::string_view(served_by(s)) == "daemon" ? "; kept by sockbufd"
									      : "");
		if (const held h = held_of(s); std::string_view(h.by) != "none")
			fmt::print("{}", text::wrap(held_text(h), "  ", "    "));
		for (int dir : {SOCKBUF_SND, SOCKBUF_RCV})
			if (int depth = show::floor_depth(s, dir))
				fmt::print("  BELOW FLOOR: {} by {}\n",
					   dir == SOCKBUF_SND ? "snd" : "rcv", depth);
		for (const auto &line : show::diagnose(s, c.limits).lines)
			fmt::print("{}", text::wrap(line, "  - ", "    "));
		print_systemd(s);
	}
	const summary sum = summarize(c);
	fmt::print("\n{} socket{}, {} with a floor, {} below their floor\n", c.sockets.size(),
		   c.sockets.size() == 1 ? "" : "s", sum.with_floor, sum.below);
}

// A usage error in one line: what was wrong, and where the help is.
int show_bad(const std::string &why)
{
	fmt::print(stderr, "sockbuf show: {} (sockbuf show --help)\n", why);
	return 2;
}

struct show_args {
	bool json = false, all = false, check = false;
	std::vector<int> pids;
	long watch_ms = 0, count = 0;
	show::trace_mode trace = show::trace_mode::autodetect;
	bool trace_given = false;
};

// The command line, or a usage error's exit status (2; 0 for --help).
int parse_show(int argc, char **argv, show_args *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end = nullptr;
		if (!std::strcmp(a, "--watch") || !std::strcmp(a, "--count")) {
			long *to = a[2] == 'w' ? &o->watch_ms : &o->count;
			const long lo = a[2] == 'w' ? show::watch_min_ms : 1;
			const long hi = a[2] == 'w' ? show::watch_max_ms : 1'000'000'000;
			const char *v = i + 1 < argc ? argv[++i] : "";
			*to = std::strtol(v, &end, 10);
			if (!*v || *end || *to < lo || *to > hi)
				return show_bad(
				    fmt::format("{} takes a number from {} to {}{}", a, lo, hi,
						*v ? fmt::format(", not '{}'", v) : ""));
		} else if (!std::strcmp(a, "--trace")) {
			const char *v = i + 1 < argc ? argv[++i] : "";
			if (!show::parse_trace_mode(v, &o->trace))
				return show_bad(
				    fmt::format("--trace takes auto, on or off{}",
						*v ? fmt::format(", not '{}'", v) : ""));
			o->trace_given = true;
		} else if (!std::strcmp(a, "--json")) {
			o->json = true;
		} else if (!std::strcmp(a, "--all")) {
			o->all = true;
		} else if (!std::strcmp(a, "--check")) {
			o->check = true;
		} else if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
			show_usage(stdout, 0);
			return 0;
		} else if (a[0] == '-' && !std::isdigit((unsigned char)a[1])) {
			return show_bad(fmt::format("unknown option '{}'", a));
		} else {
			const long v = std::strtol(a, &end, 10);
			if (!*a || *end || !std::isdigit((unsigned char)a[0]))
				return show_bad(fmt::format("'{}' is not a process id", a));
			if (v <= 0 || v >= (1l << 22))
				return show_bad(fmt::format("process id {} out of range (1 to {})",
							    a, (1l << 22) - 1));
			o->pids.push_back(int(v));
		}
	}
	if (o->all && !o->pids.empty())
		return show_bad(fmt::format("--all lists every process: not with a process id "
					    "({})",
					    o->pids[0]));
	if (!o->all && o->pids.empty())
		return show_bad("which process? give a PID (or several) or --all");
	if (o->watch_ms && o->all)
		return show_bad("--watch follows one process: not with --all");
	if (o->watch_ms && o->json)
		return show_bad("--watch prints text: not with --json");
	if (o->watch_ms && o->check)
		return show_bad("--check is one look: not with --watch");
	if (o->watch_ms && o->pids.size() > 1)
		return show_bad(fmt::format("--watch follows one process, not {}", o->pids.size()));
	if (o->check && o->json)
		return show_bad("--check prints lines: not with --json");
	if ((o->count || o->trace_given) && !o->watch_ms)
		return show_bad(
		    fmt::format("{} goes with --watch MS", o->count ? "--count" : "--trace"));
	return -1;
}

// Every process of @pids in one collection (the limits of the first that
// could be read); a line on standard error for each that could not.
// false when none could.
bool collect_pids(const std::vector<int> &pids, collection *c, bool *some_failed)
{
	bool any = false;
	for (int pid : pids) {
		collection one;
		std::string why;
		if (show::collect_pid(pid, &one, &why) < 0) {
			fmt::print(stderr, "sockbuf show: {}\n", why);
			*some_failed = true;
			continue;
		}
		if (!any)
			c->limits = one.limits;
		any = true;
		for (auto &s : one.sockets)
			c->sockets.push_back(std::move(s));
		for (auto &n : one.notes)
			c->notes.push_back(std::move(n));
	}
	return any;
}

} // namespace

int cmd_show(int argc, char **argv)
{
	show_args o;
	if (int ret = parse_show(argc, argv, &o); ret >= 0)
		return ret;
	// Tables left by processes that are gone (_exit, a fatal signal).
	registry::clean_stale(registry::default_dir);
	if (o.watch_ms)
		return show::watch(o.pids[0], int(o.watch_ms), o.count, int(o.trace));
	collection c;
	bool some_failed = false;
	if (o.all) {
		std::string why;
		if (show::collect_all(&c, &why) < 0) {
			fmt::print(stderr, "sockbuf show: {}\n", why);
			return 1;
		}
	} else if (!collect_pids(o.pids, &c, &some_failed)) {
		return 1;
	}
	show::name_systemd_units(&c);
	if (o.check)
		return show::print_check(c) ? 3 : some_failed ? 1 : 0;
	if (o.json)
		print_json(c, o.pids.size() == 1 ? o.pids[0] : 0, o.pids);
	else
		print_text(c);
	if (some_failed)
		return 1;
	return summarize(c).below > 0 ? 3 : 0;
}

} // namespace sockbuf::cli
