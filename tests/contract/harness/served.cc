// SPDX-License-Identifier: MIT
#include "served.h"

#include "child.h"
#include "clauses.h"
#include "clock.h"

#include <sockbuf/sockbuf.h>

#include <fcntl.h>
#include <fmt/core.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sockbuf::contract
{

namespace
{

// What the served process says: once when its guard handed over (or
// gave up waiting), once when it stopped.
struct served_ready {
	int32_t sockets = 0, add_err = 0;
	int32_t pid = 0, err = 0; // sockbuf_guard_daemon_totals at the hand-over
	int64_t waited_ns = 0;
};
struct served_end {
	sockbuf_guard_totals t = {};
	sockbuf_guard_daemon_totals d = {};
};

constexpr int64_t handover_wait_ns = 3'000'000'000;

// Reads exactly @n bytes within @ms; false on EOF, error or timeout.
bool read_within(int fd, void *p, size_t n, int64_t ms)
{
	char *c = static_cast<char *>(p);
	const int64_t end = now_ns() + ms * 1'000'000;
	while (n) {
		const int64_t left = (end - now_ns()) / 1'000'000;
		if (left <= 0)
			return false;
		pollfd pf = {fd, POLLIN, 0};
		const int k = poll(&pf, 1, int(left));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		const ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		c += r;
		n -= size_t(r);
	}
	return true;
}

// Waits for @pid (at most @ms), then kills it; its status or -1.
int reap(pid_t pid, int64_t ms)
{
	const int64_t end = now_ns() + ms * 1'000'000;
	int status = 0;
	for (;;) {
		const pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now_ns() >= end)
			break;
		poll(nullptr, 0, 5); // a bounded wait for a child's exit
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return -1;
}

bool executable(const std::string &p)
{
	return !p.empty() && access(p.c_str(), X_OK) == 0;
}

// The sum of sockbuf_restores_total's series with source="daemon" in the
// daemon's metrics file; -1 when none was there.
int64_t daemon_restores(const std::string &path)
{
	std::ifstream in(path);
	std::string line;
	int64_t total = -1;
	while (std::getline(in, line)) {
		if (line.rfind("sockbuf_restores_total{", 0) != 0 ||
		    line.find("source=\"daemon\"") == std::string::npos)
			continue;
		const size_t sp = line.rfind(' ');
		if (sp == std::string::npos)
			continue;
		total = std::max<int64_t>(total, 0) +
			int64_t(std::strtod(line.c_str() + sp + 1, nullptr));
	}
	return total;
}

// The served process: a guard of its own over the daemon-mode sockets,
// handed over to the daemon in @run_dir.
[[noreturn]] void served_main(const std::vector<std::pair<int, sockbuf_floor>> &fds,
			      const std::string &run_dir, uint32_t interval_us, int ctl, int res)
{
	std::vector<int> keep = {ctl, res};
	for (const auto &f : fds)
		keep.push_back(f.first);
	after_fork(SIGKILL, keep);
	setenv("SOCKBUF_DAEMON_DIR", run_dir.c_str(), 1);
	served_ready ready;
	const int id = sockbuf_guard_new(SOCKBUF_GUARD_ALLOW_FORCE);
	ready.add_err = id < 0 ? id : 0;
	for (const auto &f : fds) {
		if (id < 0)
			break;
		const int r = sockbuf_guard_add(id, f.first, &f.second);
		if (r < 0 && !ready.add_err)
			ready.add_err = r;
		else if (r >= 0)
			ready.sockets++;
	}
	if (id >= 0) {
		const int r = sockbuf_guard_start(id, interval_us);
		if (r < 0 && !ready.add_err)
			ready.add_err = r;
	}
	// The hand-over is looked for at the guard's first pass, then at
	// most once a second.
	const int64_t t0 = now_ns();
	sockbuf_guard_daemon_totals d = {};
	while (id >= 0 && now_ns() - t0 < handover_wait_ns) {
		if (sockbuf_guard_daemon_stats(id, &d) == 0 && d.pid > 0)
			break;
		pollfd p = {ctl, POLLIN, 0};
		if (poll(&p, 1, 10) > 0)
			break; // stopped early, or the scenario's process is gone
	}
	ready.pid = d.pid;
	ready.err = d.err;
	ready.waited_ns = now_ns() - t0;
	if (!write_all(res, &ready, sizeof(ready)))
		_exit(1);
	char one;
	while (read(ctl, &one, 1) < 0 && errno == EINTR)
		;
	served_end end;
	if (id >= 0) {
		// Who served, read before the stop (which ends the hand-over).
		sockbuf_guard_daemon_stats(id, &end.d);
		sockbuf_guard_stop(id);
		sockbuf_guard_stats(id, &end.t);
	}
	if (!write_all(res, &end, sizeof(end)))
		_exit(1);
	// Alive until the daemon has stopped: a process gone is forgotten,
	// its series with it, before the daemon writes its last metrics.
	while (read(ctl, &one, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

} // namespace

std::string find_sockbufd()
{
	const char *env = getenv("SOCKBUF_CONTRACT_SOCKBUFD");
	if (env && *env)
		return executable(env) ? std::string(env) : std::string();
	char self[PATH_MAX];
	const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		std::string dir(self);
		dir.resize(dir.rfind('/'));
		for (const std::string &p : {dir + "/sockbufd", dir + "/../sbin/sockbufd"})
			if (executable(p))
				return p;
	}
	return executable("/usr/sbin/sockbufd") ? "/usr/sbin/sockbufd" : "";
}

served_guard::~served_guard()
{
	end_children();
}

void served_guard::end_children()
{
	for (int *fd : {&ctl_fd_, &res_fd_})
		if (*fd >= 0) {
			close(*fd);
			*fd = -1;
		}
	if (served_ > 0)
		reap(served_, 0);
	served_ = -1;
	if (daemon_ > 0) {
		kill(daemon_, SIGTERM);
		reap(daemon_, 5000);
	}
	daemon_ = -1;
}

std::string served_guard::prepare(const daemon_spec &spec)
{
	spec_ = spec;
	sockbufd_ = find_sockbufd();
	if (sockbufd_.empty())
		return "no sockbufd here (beside this program, /usr/sbin, or "
		       "$SOCKBUF_CONTRACT_SOCKBUFD)";
	// Root here (an unprivileged run is root of its user namespace): a
	// guard hands over only to a daemon whose presence file is root's.
	if (geteuid() != 0)
		return "a guard hands over only to a root daemon, and this process is not root";
	// A /dev/shm and a run directory of the scenario's own.
	if (unshare(CLONE_NEWNS) != 0)
		return fmt::format("unshare(CLONE_NEWNS): {}", strerror(errno));
	if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
		return fmt::format("mount --make-rprivate /: {}", strerror(errno));
	if (mount("sockbuf-contract", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=1777,size=16m") != 0)
		return fmt::format("tmpfs on /dev/shm: {}", strerror(errno));
	dir_ = "/dev/shm/sockbuf-contract";
	run_dir_ = dir_ + "/run";
	for (const std::string &d : {dir_, run_dir_})
		if ((mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) || chmod(d.c_str(), 0755) != 0)
			return fmt::format("{}: {}", d, strerror(errno));
	metrics_ = dir_ + "/sockbufd.prom";
	log_ = dir_ + "/sockbufd.log";
	return "";
}

std::string served_guard::start_daemon()
{
	const std::string interval = std::to_string(spec_.daemon_interval_ms);
	fflush(nullptr);
	daemon_ = fork();
	if (daemon_ < 0)
		return fmt::format("fork: {}", strerror(errno));
	if (daemon_ == 0) {
		after_fork(SIGTERM, {});
		// As its unit runs it (Nice=-10): the scenario's own threads
		// (the sampler is real-time) must not starve its beat.
		(void)setpriority(PRIO_PROCESS, 0, -10);
		const int log = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (log < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
		    dup2(log, 2) < 0)
			_exit(126);
		setenv("SOCKBUF_DAEMON_DIR", run_dir_.c_str(), 1);
		execl(sockbufd_.c_str(), sockbufd_.c_str(), "--interval", interval.c_str(),
		      "--events", "off", "--metrics-file", metrics_.c_str(), nullptr);
		_exit(127);
	}
	// The daemon serves once its presence file is there.
	const std::string presence = run_dir_ + "/serving";
	const int64_t until = now_ns() + 3'000'000'000;
	for (;;) {
		if (access(presence.c_str(), F_OK) == 0)
			break;
		int status;
		if (waitpid(daemon_, &status, WNOHANG) == daemon_) {
			daemon_ = -1;
			std::ifstream in(log_);
			std::stringstream text;
			text << in.rdbuf();
			return fmt::format("sockbufd exited at start: {}", text.str());
		}
		if (now_ns() >= until)
			return "sockbufd wrote no presence file within 3 s";
		poll(nullptr, 0, 5); // a bounded wait for the daemon's file
	}
	return "";
}

std::string served_guard::start(const std::vector<socket_record> &sockets)
{
	std::vector<std::pair<int, sockbuf_floor>> fds;
	for (const auto &s : sockets)
		if (s.a == arm::lib_initial && s.driver == guard_driver::daemon &&
		    s.r != role::listener && s.fd >= 0 && (s.snd.floor > 0 || s.rcv.floor > 0))
			fds.push_back({s.fd, sockbuf_floor{s.snd.floor, s.rcv.floor}});
	if (fds.empty())
		return "no daemon-mode socket";
	// Its sockets are the mode's whatever happens below: their dips are
	// judged, and without a guard they last.
	sockets_ = int(fds.size());
	// Without a daemon the served process still runs: its guard keeps
	// its sockets itself, and the hand-over's figures say so.
	std::string no_daemon = start_daemon();
	int ctl[2], res[2];
	if (pipe2(ctl, O_CLOEXEC) != 0)
		return fmt::format("pipe: {}", strerror(errno));
	if (pipe2(res, O_CLOEXEC) != 0) {
		close(ctl[0]);
		close(ctl[1]);
		return fmt::format("pipe: {}", strerror(errno));
	}
	fflush(nullptr);
	served_ = fork();
	if (served_ < 0) {
		for (int fd : {ctl[0], ctl[1], res[0], res[1]})
			close(fd);
		return fmt::format("fork: {}", strerror(errno));
	}
	if (served_ == 0)
		served_main(fds, run_dir_, spec_.guard_interval_us, ctl[0], res[1]);
	close(ctl[0]);
	close(res[1]);
	ctl_fd_ = ctl[1];
	res_fd_ = res[0];
	served_ready ready;
	if (!read_within(res_fd_, &ready, sizeof(ready), handover_wait_ns / 1'000'000 + 1000))
		return "the served process said nothing within 4 s";
	st_.daemon_pid = ready.pid;
	st_.daemon_err = ready.err;
	if (!no_daemon.empty())
		return no_daemon;
	if (ready.add_err)
		return fmt::format("the served process's guard: {}", strerror(-ready.add_err));
	if (ready.pid <= 0)
		return fmt::format("the guard did not hand over to sockbufd within {:.1f} s ({})",
				   double(ready.waited_ns) / 1e9,
				   ready.err ? strerror(-ready.err) : "no look yet");
	return "";
}

void served_guard::stop()
{
	if (stopped_)
		return;
	stopped_ = true;
	st_.driver = driver_name(guard_driver::daemon);
	st_.a = arm::lib_initial;
	st_.sockets = sockets_;
	st_.interval_us = spec_.guard_interval_us;
	st_.daemon_interval_us = spec_.daemon_interval_ms * 1000;
	if (served_ > 0 && ctl_fd_ >= 0) {
		const char one = 1;
		served_end end;
		if (write_all(ctl_fd_, &one, 1) && read_within(res_fd_, &end, sizeof(end), 5000)) {
			st_.passes = end.t.passes;
			st_.violations = end.t.below;
			st_.restores = end.t.restored;
			st_.restore_errors = end.t.errors;
			st_.max_pass_us = end.t.max_pass_ns / 1000;
			st_.max_late_us = end.t.max_late_us;
			st_.pass_total_us = end.t.total_pass_ns / 1000;
			st_.source = end.t.passes ? end.t.source : -1;
			st_.daemon_pid = end.d.pid;
			st_.daemon_err = end.d.err;
			st_.handovers = end.d.handovers;
			st_.resumes = end.d.resumes;
			st_.served_us = int64_t(end.d.served_ns / 1000);
		} else {
			st_.events.push_back("the served process did not report its guard");
		}
	}
	if (daemon_ > 0) {
		kill(daemon_, SIGTERM); // its last metrics, then exit
		const int status = reap(daemon_, 5000);
		daemon_ = -1;
		st_.daemon_restores = daemon_restores(metrics_);
		if (st_.daemon_restores < 0)
			st_.events.push_back(
			    fmt::format("sockbufd (exit status {:#x}) counted no restore in {}",
					status, metrics_));
		std::ifstream in(log_);
		std::stringstream text;
		text << in.rdbuf();
		log_text_ = text.str();
	}
	if (served_ > 0) {
		close(ctl_fd_); // the served process exits
		ctl_fd_ = -1;
		reap(served_, 5000);
		served_ = -1;
	}
	// No wait is excused: the served guard skips its passes on purpose,
	// and the daemon's scheduling is not measured here.
	st_.sched_why = "the daemon and the served process's guard run in processes of "
			"their own: their run-queue waits are not read";
	end_children();
}

std::string served_text(const guard_stats &g, const daemon_spec &spec)
{
	std::string who = g.daemon_pid > 0 ? fmt::format("sockbufd (pid {}", g.daemon_pid)
					   : std::string("sockbufd (");
	std::string out = fmt::format("daemon mode: {}{}--interval {} ms, --events off) ", who,
				      g.daemon_pid > 0 ? ", " : "", spec.daemon_interval_ms);
	if (g.handovers == 0)
		out += fmt::format("never served the guard of {} sockets (interval {:.0f} ms): {}",
				   g.sockets, g.interval_us / 1e3,
				   g.daemon_err < 0 ? strerror(-g.daemon_err) : "no hand-over");
	else
		out += fmt::format(
		    "served the guard of {} sockets (interval {:.0f} ms) for {:.2f} s: {} "
		    "hand-overs, {} resumes",
		    g.sockets, g.interval_us / 1e3, double(g.served_us) / 1e6, g.handovers,
		    g.resumes);
	out += fmt::format("; restores: {} by the daemon, {} by the guard",
			   g.daemon_restores < 0 ? std::string("unknown")
						 : std::to_string(g.daemon_restores),
			   g.restores);
	return out;
}

guard_stats served_guard::stats(const pass_cost &cost) const
{
	// The promise the served process keeps: its own guard's, from its
	// configuration (the daemon keeps every kind of cut at least as
	// soon).
	guard_stats g = st_;
	g.bound_us = repair_bound_us(g.interval_us, g.sockets, true, cost);
	return g;
}

} // namespace sockbuf::contract
