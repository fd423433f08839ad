// SPDX-License-Identifier: MIT
// sockbuf run [--policy NAME] [--config STRING] [--via WAY] ... -- CMD ARGS...
//
// Runs CMD with libsockbuf-shim.so preloaded and SOCKBUF_SHIM set, or,
// where the shim cannot reach the program's setsockopt() (static, Go),
// under the seccomp supervisor (supervise.h), so an unchanged program gets
// sockbuf's behaviour (shim/README.md).
#include "commands.h"

#include "run_target.h"
#ifdef SOCKBUF_RUN_SUPERVISOR
#include "supervise.h"
#endif

#include "shim/config.h" // the same parser the shim uses
#define SOCKBUF_RUN_CHECKS_CONFIG 1

#include <fmt/core.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <sockbuf/sockbuf.h>

namespace sockbuf::cli
{

namespace
{

constexpr const char *shim_file = "libsockbuf-shim.so";

int run_usage(std::FILE *to, int status)
{
	fmt::print(to,
		   "usage: sockbuf run [--policy passthrough|initial|lock] [--config STRING]\n"
		   "                   [--log stderr|fd=N|/path] [--floor-guard MS] [--reserve]\n"
		   "                   [--guard-events on|off] [--guard-bpf on|off]\n"
		   "                   [--guard-daemon on|off]\n"
		   "                   [--via auto|seccomp|preload] [-q|--quiet] [--shim PATH]\n"
		   "                   [--] CMD [ARGS...]\n"
		   "\n"
		   "Runs CMD so that its SO_SNDBUF/SO_RCVBUF requests get sockbuf's policy\n"
		   "(default initial: the size becomes an unlocked starting size).  --config\n"
		   "adds further items in the shim's grammar, e.g. 'port=2049:lock'.\n"
		   "\n"
		   "--via preload   the LD_PRELOAD shim, found with --shim, $SOCKBUF_SHIM_PATH,\n"
		   "                next to this program (../lib) or in the install libdir\n"
		   "--via seccomp   no preload: CMD runs under a seccomp filter that passes\n"
		   "                only those setsockopt calls to this process, which applies\n"
		   "                the policy through pidfd_getfd() (Linux 5.6); for static\n"
		   "                programs and programs making their own system calls (Go)\n"
		   "--via auto      (default) seccomp when CMD is static or does not link\n"
		   "                libc's setsockopt and the kernel allows it, else preload\n"
		   "The way chosen is said in one line on standard error (-q: only when\n"
		   "the preload path cannot work).\n"
		   "\n"
		   "--floor-guard MS every MS ms, each buffer given an initial size that\n"
		   "fell below its floor is raised back: by a thread in CMD (preload), or\n"
		   "by the supervisor, which takes the socket with pidfd_getfd() only to\n"
		   "restore it, after checking it is still the same socket (seccomp).\n"
		   "--guard-events on|off (preload, default on) the thread wakes on the\n"
		   "kernel's cuts (BPF on the functions that cut; root or CAP_BPF and\n"
		   "CAP_PERFMON) with full passes every 60 s as a safety net for the cuts\n"
		   "no program sees (setsockopt), where the programs load; elsewhere it\n"
		   "polls every MS ms.  --guard-bpf on|off (preload, default off) makes\n"
		   "each pass one BPF iterator.  --guard-daemon on|off (preload, default\n"
		   "on) off: the thread never stands down for sockbufd; on, it does only\n"
		   "while the daemon makes progress and keeps every kind of cut at least\n"
		   "as soon as the thread would (sockbufd(8)).  The line that says the\n"
		   "way also says what the guard gets, and why.\n"
		   "--reserve (preload) reserves each connecting and accepted socket's\n"
		   "floor with SO_RESERVE_MEM where the memory cgroup allows it ('sockbuf\n"
		   "probe').\n"
		   "\n"
		   "Exit status: CMD's own (128+N when signal N ended it under the\n"
		   "supervisor); 2 bad option or configuration; 125 the supervisor could\n"
		   "not be set up; 126 CMD not executable; 127 CMD or the shim not found.\n");
	return status;
}

std::string exe_dir()
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return {};
	buf[n] = '\0';
	std::string path(buf);
	return path.substr(0, path.rfind('/'));
}

std::string canonical_if_exists(const std::string &path)
{
	char buf[PATH_MAX];
	if (access(path.c_str(), R_OK) != 0 || !realpath(path.c_str(), buf))
		return {};
	return buf;
}

std::string find_shim(const char *given)
{
	std::vector<std::string> candidates;
	if (given)
		candidates.push_back(given);
	else if (const char *env = std::getenv("SOCKBUF_SHIM_PATH"); env && *env)
		candidates.push_back(env);
	else {
		std::string dir = exe_dir();
		if (!dir.empty()) {
			candidates.push_back(dir + "/../lib/" + shim_file);
#ifdef SOCKBUF_SHIM_REL_LIBDIR
			candidates.push_back(dir + "/../" SOCKBUF_SHIM_REL_LIBDIR "/" + shim_file);
#endif
		}
#ifdef SOCKBUF_SHIM_INSTALL_LIBDIR
		candidates.push_back(std::string(SOCKBUF_SHIM_INSTALL_LIBDIR "/") + shim_file);
#endif
	}
	for (const auto &c : candidates)
		if (auto found = canonical_if_exists(c); !found.empty())
			return found;
	fmt::print(stderr, "sockbuf run: cannot find {}; looked in:\n", shim_file);
	for (const auto &c : candidates)
		fmt::print(stderr, "  {}\n", c);
	return {};
}

int exec_plain(char **cmd)
{
	execvp(cmd[0], cmd);
	int err_no = errno;
	fmt::print(stderr, "sockbuf run: {}: {}\n", cmd[0], std::strerror(err_no));
	return err_no == ENOENT ? 127 : 126;
}

int bad_arg(const std::string &why)
{
	fmt::print(stderr, "sockbuf run: {}\n", why);
	fmt::print(stderr,
		   "usage: sockbuf run [OPTIONS] [--] CMD [ARGS...]  (sockbuf run --help)\n");
	return 2;
}

// The way a run goes, said in one line on standard error.
enum class via { automatic, preload, seccomp };

int exec_preload(char **cmd, const std::string &config, const char *shim)
{
	std::string path = find_shim(shim);
	if (path.empty())
		return 127;
	std::string preload = path;
	if (const char *old = std::getenv("LD_PRELOAD"); old && *old)
		preload += fmt::format(":{}", old);
	if (setenv("LD_PRELOAD", preload.c_str(), 1) != 0 ||
	    setenv("SOCKBUF_SHIM", config.c_str(), 1) != 0) {
		fmt::print(stderr, "sockbuf run: setenv: {}\n", std::strerror(errno));
		return 127;
	}
	return exec_plain(cmd);
}

#ifdef SOCKBUF_RUN_CHECKS_CONFIG
// Whether a guard of this process gets its passes from the BPF iterator:
// 0, or why not (one pass over one socket of its own is the sure test).
int probe_guard_bpf()
{
	const int g = sockbuf_guard_new(SOCKBUF_GUARD_BPF);
	if (g < 0)
		return g;
	const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	const struct sockbuf_floor floor = {4096, 0};
	struct sockbuf_guard_totals tot = {};
	int err = s < 0 ? -errno : sockbuf_guard_add(g, s, &floor);
	if (err == 0)
		err = sockbuf_guard_pass(g, nullptr);
	if (err >= 0)
		err = sockbuf_guard_stats(g, &tot);
	if (err == 0 && tot.source != SOCKBUF_GUARD_SRC_BPF)
		err = tot.bpf_err ? tot.bpf_err : -ENOENT;
	if (s >= 0)
		close(s);
	sockbuf_guard_destroy(g);
	return err;
}

std::string errno_name(int err)
{
	const char *name = strerrorname_np(-err);
	return name ? name : fmt::format("errno {}", -err);
}

// What the shim's floor guard will get in the program, tried here with
// the same credentials: "events refused: EPERM, polling every 10 ms".
std::string guard_source_text(const shim::config &cfg)
{
	std::string out = "floor guard: ";
	if (!cfg.guard_events) {
		out += fmt::format("events off, polling every {} ms", cfg.guard_ms);
	} else if (const guard_events ev = probe_guard_events(); ev.err == 0) {
		out += fmt::format("events on (fexit on {}), safety-net passes every {} ms",
				   ev.attached, SOCKBUF_GUARD_NET_DEFAULT_US / 1000);
	} else {
		out += fmt::format("events refused: {}, polling every {} ms", errno_name(ev.err),
				   cfg.guard_ms);
	}
	if (!cfg.guard_daemon)
		out += "; never stands down for sockbufd";
	if (cfg.guard_bpf) {
		const int err = probe_guard_bpf();
		out += err == 0 ? "; passes by BPF iterator"
				: fmt::format("; BPF pass refused: {}", errno_name(err));
	}
	return out;
}
#endif

} // namespace

int cmd_run(int argc, char **argv)
{
	const char *policy = nullptr, *extra = nullptr, *log = nullptr, *shim = nullptr,
		   *guard = nullptr, *via_arg = nullptr, *guard_events = nullptr,
		   *guard_bpf = nullptr, *guard_daemon = nullptr;
	bool reserve = false, quiet = false;
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!std::strcmp(a, "--")) {
			i++;
			break;
		}
		if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help"))
			return run_usage(stdout, 0);
		if (!std::strcmp(a, "--reserve")) {
			reserve = true;
			continue;
		}
		if (!std::strcmp(a, "-q") || !std::strcmp(a, "--quiet")) {
			quiet = true;
			continue;
		}
		const char **slot = !std::strcmp(a, "--policy")		? &policy
				    : !std::strcmp(a, "--config")	? &extra
				    : !std::strcmp(a, "--log")		? &log
				    : !std::strcmp(a, "--shim")		? &shim
				    : !std::strcmp(a, "--floor-guard")	? &guard
				    : !std::strcmp(a, "--via")		? &via_arg
				    : !std::strcmp(a, "--guard-events") ? &guard_events
				    : !std::strcmp(a, "--guard-bpf")	? &guard_bpf
				    : !std::strcmp(a, "--guard-daemon") ? &guard_daemon
									: nullptr;
		if (!slot) {
			if (a[0] == '-')
				return bad_arg(fmt::format("unknown option '{}'", a));
			break; // the command itself, without "--"
		}
		if (i + 1 >= argc)
			return bad_arg(fmt::format("option '{}' needs a value", a));
		*slot = argv[++i];
	}
	if (i >= argc)
		return bad_arg("no command to run");
	via how = via::automatic;
	if (via_arg) {
		if (!std::strcmp(via_arg, "seccomp"))
			how = via::seccomp;
		else if (!std::strcmp(via_arg, "preload"))
			how = via::preload;
		else if (std::strcmp(via_arg, "auto") != 0)
			return bad_arg(
			    fmt::format("--via '{}': want auto, seccomp or preload", via_arg));
	}

	// A value is one item's value: the configuration grammar has no
	// escape, so a ',' '#' or newline in it would start another item or a
	// comment ("--floor-guard '10,force:allow'" turning FORCE on).  Only
	// --config takes items.
	for (const auto &[opt, val] : {std::pair{"--policy", policy}, std::pair{"--log", log},
				       std::pair{"--floor-guard", guard}})
		if (val && std::strpbrk(val, ",#\n"))
			return bad_arg(fmt::format("{} '{}': a value may not hold ',', '#' or a "
						   "newline (use --config for more items)",
						   opt, val));
	// Named here, by the option: the grammar's error would name the item
	// the option became.
	if (guard) {
		char *end = nullptr;
		const long ms = std::strtol(guard, &end, 10);
		if (std::strcmp(guard, "off") != 0 &&
		    (!*guard || *end || !std::isdigit((unsigned char)*guard) || ms < 1 ||
		     ms > 60000))
			return bad_arg(fmt::format("--floor-guard '{}': a number of milliseconds "
						   "from 1 to 60000 (or off)",
						   guard));
	}
	std::string config = fmt::format("policy:{}", policy ? policy : "initial");
	if (extra && *extra)
		config += fmt::format(",{}", extra);
	if (log)
		config += fmt::format(",log:{}", log);
	if (guard)
		config += fmt::format(",guard:{}", guard);
	for (const auto &[opt, val, key] :
	     {std::tuple{"--guard-events", guard_events, "guard_events"},
	      std::tuple{"--guard-bpf", guard_bpf, "guard_bpf"},
	      std::tuple{"--guard-daemon", guard_daemon, "guard_daemon"}}) {
		if (!val)
			continue;
		if (std::strcmp(val, "on") != 0 && std::strcmp(val, "off") != 0)
			return bad_arg(fmt::format("{} '{}': want on or off", opt, val));
		config += fmt::format(",{}:{}", key, val);
	}
	if (reserve)
		config += ",reserve:on";
#ifdef SOCKBUF_RUN_CHECKS_CONFIG
	// Fail here, loudly, instead of starting the program with a shim that
	// warns once and stays inactive.
	shim::config parsed;
	char err[256];
	if (!shim::parse(config.data(), config.size(), &parsed, err, sizeof(err))) {
		fmt::print(stderr, "sockbuf run: bad configuration: {}\n", err);
		return 2;
	}
#endif
	char **cmd = argv + i;
	const run::target_info t = run::inspect(run::resolve_command(cmd[0]));
	if (t.path.empty())
		return exec_plain(cmd); // execvp's own error, 127
	const std::string what =
	    t.script.empty() ? t.path : fmt::format("{} (script for {})", t.path, t.script);
	// A dynamic program that imports no setsockopt but starts others
	// (env, sh, timeout) is taken for a launcher: what it starts gets the
	// shim through the environment.
	// One that loads libraries later (dlopen: Python's _socket module) is
	// not: what it loads binds to libc's setsockopt, which the shim
	// interposes.
	const bool preload_blind =
	    t.link == run::linkage::static_exe ||
	    (t.link == run::linkage::dynamic_nolibc && !t.launcher && !t.loader);
	std::string seccomp_why = "sockbuf was built without the shim's configuration parser";
	bool seccomp_ok = false;
#ifdef SOCKBUF_RUN_SUPERVISOR
	seccomp_ok = run::supervisor_available(&seccomp_why) == 0;
	const std::string unsupported = run::supervisor_unsupported(parsed);
#endif
	// Secure execution: ld.so drops LD_PRELOAD.  Root installs the filter
	// without no_new_privs, so the program keeps its privileges under the
	// supervisor; anyone else would take them away: never by default, not
	// even for a static set-user-ID program the shim cannot reach (it then
	// runs unchanged, and the line below says so).
	const bool would_lose_privileges = t.secure && geteuid() != 0;
	if (how == via::automatic)
		how = (preload_blind || t.secure) && seccomp_ok && !would_lose_privileges
			  ? via::seccomp
			  : via::preload;
	if (how == via::seccomp) {
		if (!seccomp_ok) {
			fmt::print(stderr, "sockbuf run: --via seccomp: {}\n", seccomp_why);
			return 125;
		}
#ifdef SOCKBUF_RUN_SUPERVISOR
		if (!unsupported.empty()) {
			fmt::print(stderr,
				   "sockbuf run: --via seccomp: {} need the preload path "
				   "(listen/connect/accept hooks or a thread in the program)\n",
				   unsupported);
			return 2;
		}
		if (would_lose_privileges)
			fmt::print(stderr,
				   "sockbuf run: {} is {}: under the supervisor it runs with "
				   "no_new_privs, without those privileges\n",
				   what, t.secure_why);
		else if (geteuid() != 0)
			// The filter comes with no_new_privs, which every program
			// this one starts inherits: a helper's privileges are lost.
			fmt::print(stderr,
				   "sockbuf run: not root: {} and the programs it starts run with "
				   "no_new_privs; a set-user-ID or file-capability program among "
				   "them gets no privileges\n",
				   what);
		if (!quiet)
			fmt::print(stderr, "sockbuf run: via seccomp supervisor: {} {}{}\n", what,
				   t.secure ? fmt::format("is {} (ld.so would ignore LD_PRELOAD)",
							  t.secure_why)
					    : run::linkage_text(t.link, t.loader),
				   parsed.guard_ms
				       ? fmt::format("; floor guard: the supervisor's, polling "
						     "every {} ms (inet_diag; events and the BPF "
						     "pass need the preload path)",
						     parsed.guard_ms)
				       : std::string());
		std::fflush(stderr);
		return run::supervise(cmd, parsed);
#endif
	}
	// The preload path, and when it cannot work, say so and what happens.
	if (t.secure) {
		fmt::print(stderr,
			   "sockbuf run: {} is {}: ld.so ignores LD_PRELOAD in secure "
			   "execution and the shim stays inactive; it runs unchanged{}\n",
			   what, t.secure_why,
			   geteuid() != 0 ? std::string(" (--via seccomp would run it without "
							"those privileges)")
			   : seccomp_ok	  ? std::string(" (--via seccomp reaches it)")
					: fmt::format(" (no seccomp supervisor: {})", seccomp_why));
	} else if (preload_blind) {
		fmt::print(stderr,
			   "sockbuf run: {} {}: the shim cannot reach its setsockopt() and {}; "
			   "it runs unchanged\n",
			   what, run::linkage_text(t.link, t.loader),
			   via_arg ? "--via preload was asked for"
				   : fmt::format("the seccomp supervisor is unavailable: {}",
						 seccomp_why));
	} else if (!quiet) {
		fmt::print(stderr, "sockbuf run: via preload: {} {}{}{}\n", what,
			   run::linkage_text(t.link, t.loader),
			   preload_blind || !t.launcher || t.loader ||
				   t.link == run::linkage::dynamic_libc
			       ? ""
			       : " but starts other programs, which inherit the shim (for a "
				 "static one: --via seccomp)",
#ifdef SOCKBUF_RUN_CHECKS_CONFIG
			   parsed.guard_ms ? "; " + guard_source_text(parsed) : std::string());
#else
			   "");
#endif
	}
	std::fflush(stderr);
	return exec_preload(cmd, config, shim);
}

} // namespace sockbuf::cli
