// SPDX-License-Identifier: MIT
// The tracefs recorder: an instance of our own, events enabled there only,
// kprobe events defined under a name that carries our pid, and a teardown
// that runs at stop(), in the destructor and from SIGINT/SIGTERM.
#include "trace.h"

#include "read_file.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>
#include <sstream>

namespace sockbuf::trace
{

namespace
{

// What teardown must undo, in fixed storage so that a signal handler can
// run it with async-signal-safe calls only (open, write, close, rmdir).
constexpr int max_enabled = 16, max_kprobes = 8, path_len = 512;
struct teardown_plan {
	pid_t owner = 0;
	int n_enable = 0, n_kprobes = 0;
	char enable[max_enabled][path_len] = {};
	char instance[path_len] = {};
	char kprobe_events[path_len] = {};
	char kprobe_rm[max_kprobes][160] = {};
};
teardown_plan g_plan;
std::atomic<int> g_pipe_fd{-1};	   // trace_pipe while drain() reads it
std::atomic<bool> g_in_use{false}; // one recorder per process
struct sigaction g_old_int, g_old_term;

void write_str(int fd, const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= size_t(w);
	}
}

// Async-signal-safe: disable our events, delete the instance (which needs
// no reader left open), then remove our kprobe events (which must be
// disabled everywhere first).  Appends to kprobe_events, never truncates:
// truncating would remove every kprobe event of the system.
void run_teardown()
{
	int pfd = g_pipe_fd.exchange(-1);
	if (pfd >= 0)
		close(pfd);
	for (int i = 0; i < g_plan.n_enable; i++) {
		int fd = open(g_plan.enable[i], O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			write_str(fd, "0");
			close(fd);
		}
	}
	g_plan.n_enable = 0;
	if (g_plan.instance[0]) {
		rmdir(g_plan.instance);
		g_plan.instance[0] = 0;
	}
	if (g_plan.n_kprobes && g_plan.kprobe_events[0]) {
		int fd = open(g_plan.kprobe_events, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd >= 0) {
			for (int i = 0; i < g_plan.n_kprobes; i++)
				write_str(fd, g_plan.kprobe_rm[i]);
			close(fd);
		}
	}
	g_plan.n_kprobes = 0;
}

void on_signal(int sig)
{
	int saved = errno;
	if (getpid() == g_plan.owner)
		run_teardown();
	const struct sigaction &old = sig == SIGINT ? g_old_int : g_old_term;
	if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN &&
	    !(old.sa_flags & SA_SIGINFO)) {
		old.sa_handler(sig);
		errno = saved;
		return;
	}
	// Die of the signal, as without us: it is blocked in here and is
	// delivered when the handler returns.
	signal(sig, SIG_DFL);
	raise(sig);
	errno = saved;
}

void copy_to(char *dst, size_t cap, const std::string &s)
{
	size_t n = std::min(cap - 1, s.size());
	memcpy(dst, s.data(), n);
	dst[n] = 0;
}

bool exists(const std::string &p)
{
	return access(p.c_str(), F_OK) == 0;
}

// 0 or -errno.
int write_file(const std::string &path, const std::string &text, bool append = false)
{
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | (append ? O_APPEND : O_TRUNC));
	if (fd < 0)
		return -errno;
	ssize_t w;
	do
		w = write(fd, text.data(), text.size());
	while (w < 0 && errno == EINTR);
	int err = w < 0 ? -errno : 0;
	close(fd);
	return err;
}

std::string errtext(int neg)
{
	return strerror(-neg);
}

int64_t mono_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace

std::string find_tracefs()
{
	for (const char *p : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
		if (exists(std::string(p) + "/instances"))
			return p;
	return "";
}

std::string recorder::kprobe_prefix()
{
	return "sockbuf_" + std::to_string(getpid()) + "_";
}

void recorder::install_signal_teardown()
{
	struct sigaction sa = {};
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaction(SIGINT, &sa, &g_old_int);
	sigaction(SIGTERM, &sa, &g_old_term);
	if (g_old_int.sa_handler == SIG_IGN)
		sigaction(SIGINT, &g_old_int, nullptr);
	if (g_old_term.sa_handler == SIG_IGN)
		sigaction(SIGTERM, &g_old_term, nullptr);
}

recorder::recorder(recorder_options opt) : opt_(std::move(opt)) {}

recorder::~recorder()
{
	stop();
}

void recorder::fail(const std::string &why)
{
	st_.unavailable = why;
	stop();
}

void recorder::stop()
{
	if (!active_ && st_.instance.empty())
		return;
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	run_teardown();
	g_plan.owner = 0;
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	active_ = false;
	st_.instance.clear();
	g_in_use = false;
}

int recorder::start()
{
	if (active_)
		return 0;
	// SIGINT/SIGTERM wait until the teardown plan is complete: a signal
	// in the middle of setting up would otherwise leave half of it.
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int err = start_blocked();
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return err;
}

int recorder::start_blocked()
{
	if (g_in_use.exchange(true)) {
		st_.unavailable = "another recorder is active in this process";
		return -EBUSY;
	}
	st_ = recorder_status();
	st_.tracefs = find_tracefs();
	if (st_.tracefs.empty() && opt_.mount_private && geteuid() == 0) {
		// A mount namespace of our own, so the host's mounts stay as
		// they are; tracefs is one per kernel, so it is the same data.
		const char *at = "/sys/kernel/tracing";
		if (unshare(CLONE_NEWNS) < 0) {
			g_in_use = false;
			st_.unavailable = std::string("no tracefs mounted, and no mount namespace "
						      "to mount one in: ") +
					  strerror(errno);
			return -ENOENT;
		}
		if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
		    mount("nodev", at, "tracefs", 0, nullptr) == 0) {
			st_.tracefs = at;
			st_.mounted_private = true;
		}
	}
	if (st_.tracefs.empty()) {
		g_in_use = false;
		st_.unavailable = "no tracefs (neither /sys/kernel/tracing nor "
				  "/sys/kernel/debug/tracing is mounted)";
		return -ENOENT;
	}
	const std::string &T = st_.tracefs;
	if (access((T + "/instances").c_str(), W_OK) < 0) {
		int e = errno;
		g_in_use = false;
		st_.unavailable = std::string(geteuid() ? "not root: " : "") + T +
				  "/instances not writable (" + strerror(e) + ")";
		return -e;
	}
	std::string inst = T + "/instances/sockbuf-" + std::to_string(getpid());
	if (mkdir(inst.c_str(), 0700) < 0) {
		int e = errno;
		g_in_use = false;
		st_.unavailable = "cannot create tracing instance " + inst + ": " + strerror(e);
		return -e;
	}
	g_plan = teardown_plan();
	g_plan.owner = getpid();
	copy_to(g_plan.instance, path_len, inst);
	copy_to(g_plan.kprobe_events, path_len, T + "/kprobe_events");
	st_.instance = inst;
	active_ = true;

	int err = write_file(inst + "/trace_clock", "mono");
	if (err < 0) {
		fail("trace_clock mono not available (" + errtext(err) +
		     "): event times would not compare with CLOCK_MONOTONIC");
		return err;
	}
	if ((err = write_file(inst + "/buffer_size_kb", std::to_string(opt_.buffer_kb))) < 0)
		st_.missing.push_back("buffer_size_kb " + std::to_string(opt_.buffer_kb) + ": " +
				      errtext(err));
	// Keep the oldest events when the buffer fills: the first violation
	// is the one reports explain; drops are counted.
	write_file(inst + "/options/overwrite", "0");

	auto enable = [&](const std::string &dir, const std::string &printed,
			  const std::string &name) {
		std::string text;
		int e = fileio::read_file((dir + "/format").c_str(), &text);
		event_format f;
		if (e < 0 || !parse_format(text, &f)) {
			st_.missing.push_back(name + ": not in this kernel (" +
					      (e < 0 ? errtext(e) : "no format") + ")");
			return false;
		}
		if (g_plan.n_enable >= max_enabled)
			return false;
		copy_to(g_plan.enable[g_plan.n_enable++], path_len, dir + "/enable");
		if ((e = write_file(dir + "/enable", "1")) < 0) {
			st_.missing.push_back(name + ": cannot enable (" + errtext(e) + ")");
			return false;
		}
		st_.enabled.push_back(name);
		st_.formats[name] = f;
		names_[printed] = name;
		return true;
	};
	std::vector<std::string> tps = {"sock_exceed_buf_limit"};
	if (opt_.set_state)
		tps.emplace_back("inet_sock_set_state");
	for (const auto &tp : tps) {
		std::string dir = inst + "/events/sock/";
		dir += tp;
		enable(dir, tp, "sock:" + tp);
	}

	if (!opt_.kprobes.empty()) {
		std::string funcs;
		if (!exists(T + "/kprobe_events")) {
			st_.missing.push_back("kprobes: no kprobe_events (kernel built without "
					      "CONFIG_KPROBE_EVENTS)");
		} else if ((err = fileio::read_file((T + "/available_filter_functions").c_str(),
						    &funcs, 64u << 20)) < 0) {
			st_.missing.push_back("kprobes: available_filter_functions unreadable (" +
					      errtext(err) + ")");
		} else {
			std::set<std::string> have;
			std::istringstream in(funcs);
			std::string line;
			while (std::getline(in, line))
				have.insert(line.substr(0, line.find(' ')));
			for (const auto &fn : opt_.kprobes) {
				std::string name = "kprobe:" + fn;
				if (!have.count(fn)) {
					st_.missing.push_back(
					    name + ": not in available_filter_functions");
					continue;
				}
				if (g_plan.n_kprobes >= max_kprobes)
					break;
				std::string ev = kprobe_prefix() + fn;
				// struct sock_common starts with the addresses (8
				// bytes), skc_hash (4), then skc_dport and skc_num.
				std::string def = "p:kprobes/" + ev;
				def += " ";
				def += fn;
				def += " sk=$arg1:x64 skc_dport=+12($arg1):u16 "
				       "skc_num=+14($arg1):u16\n";
				if ((err = write_file(T + "/kprobe_events", def, true)) < 0) {
					st_.missing.push_back(name + ": kprobe not accepted (" +
							      errtext(err) + ")");
					continue;
				}
				copy_to(g_plan.kprobe_rm[g_plan.n_kprobes++], 160,
					"-:kprobes/" + ev + "\n");
				kprobe_names_.push_back(ev);
				std::string dir = inst + "/events/kprobes/";
				dir += ev;
				enable(dir, ev, name);
			}
		}
	}
	if (st_.enabled.empty()) {
		std::string why = "no event could be enabled";
		for (const auto &m : st_.missing)
			why += "; " + m;
		fail(why);
		return -ENOENT;
	}
	write_file(inst + "/tracing_on", "1");
	return 0;
}

int recorder::drain(std::vector<event> *out)
{
	if (!active_)
		return -ENODEV;
	int fd = open((st_.instance + "/trace_pipe").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	g_pipe_fd = fd;
	std::string pending;
	char buf[65536];
	size_t total = 0;
	const size_t max_bytes = 256u << 20;
	const int64_t deadline = mono_ns() + 10'000'000'000;
	int err = 0;
	while (total < max_bytes && mono_ns() < deadline) {
		int cur = g_pipe_fd.load();
		if (cur < 0)
			break;
		ssize_t n = read(cur, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			err = -errno;
		if (n <= 0)
			break;
		total += size_t(n);
		pending.append(buf, size_t(n));
		size_t nl = pending.rfind('\n');
		if (nl == std::string::npos)
			continue;
		for (auto &e : parse_trace(pending.substr(0, nl + 1), names_))
			out->push_back(std::move(e));
		pending.erase(0, nl + 1);
	}
	for (auto &e : parse_trace(pending, names_))
		out->push_back(std::move(e));
	int cur = g_pipe_fd.exchange(-1);
	if (cur >= 0)
		close(cur);
	// Events the full buffer could not take, summed over the CPUs.
	uint64_t dropped = 0;
	for (int cpu = 0; cpu < 4096; cpu++) {
		std::string stats;
		if (fileio::read_file(
			(st_.instance + "/per_cpu/cpu" + std::to_string(cpu) + "/stats").c_str(),
			&stats) < 0)
			break;
		std::istringstream in(stats);
		std::string line;
		while (std::getline(in, line))
			if (line.rfind("dropped events:", 0) == 0 || line.rfind("overrun:", 0) == 0)
				dropped += std::strtoull(line.substr(line.find(':') + 1).c_str(),
							 nullptr, 10);
	}
	st_.dropped = dropped;
	return err;
}

} // namespace sockbuf::trace
