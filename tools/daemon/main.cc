// SPDX-License-Identifier: MIT
// sockbufd: one host service that keeps the buffer floors every process
// publishes (host.h).  It runs in the foreground, as systemd's Type=notify
// expects (READY=1 once the first pass is done, STOPPING=1 at the end);
// SIGTERM or SIGINT end it (exit 0), SIGHUP reads every table again.
#include "closer.h"
#include "daemon_presence.h"
#include "daemon_progress.h"
#include "host.h"
#include "metrics.h"
#include "options.h"

#include <fmt/core.h>
#ifdef SOCKBUF_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace
{

using sockbuf::cli::remote::monotonic_ms;

void notify(const std::string &what)
{
#ifdef SOCKBUF_HAVE_SYSTEMD
	sd_notify(0, what.c_str());
#else
	(void)what;
#endif
}

// The signals that end or steer the daemon, read from a signalfd.
int signal_fd()
{
	sigset_t set;
	sigemptyset(&set);
	for (int s : {SIGTERM, SIGINT, SIGHUP})
		sigaddset(&set, s);
	if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0)
		return -1;
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

// The progress file guards read (daemon_progress.h): the bounds this
// daemon keeps, and a beat after every iteration of the serving loop.
void open_progress(sockbuf::progress::writer *beats, const sockbuf::daemon::options &opt,
		   const sockbuf::daemon::host &h)
{
	const uint32_t pass_us = opt.interval_ms * 1000;
	const bool events = h.events_err() == 0;
	// With events, a socket-option write (setsockopt, SO_BUF_LOCK) is
	// seen at once where sk_setsockopt() has a program; otherwise it
	// waits for the full passes (the safety net's, with events).
	const bool writes = events && (h.events_attached() & sockbuf::bpf::ev_sk_setsockopt);
	const uint32_t full_us = events ? opt.net_ms * 1000 : pass_us;
	const sockbuf::progress::bounds b = {pass_us, events ? 0 : pass_us, writes ? 0 : full_us};
	if (int err = beats->open(b))
		fmt::print(stderr, "sockbufd: {}/{}: {}; no guard stands down for this daemon\n",
			   sockbuf::presence::dir(), sockbuf::progress::file_name,
			   std::strerror(-err));
}

// One daemon per run directory: a second one would serve the same
// processes beside the first and overwrite its presence file.  An flock()
// on DIR/sockbufd.lock, held for the daemon's life (the kernel drops it
// when the process ends, however it ends), the holder's pid written in
// it.  The descriptor, or -1 with the reason said.
int lock_run_dir()
{
	const std::string dir = sockbuf::presence::dir();
	if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
		fmt::print(stderr, "sockbufd: {}: {}\n", dir, std::strerror(errno));
		return -1;
	}
	const std::string path = dir + "/sockbufd.lock";
	const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		fmt::print(stderr, "sockbufd: {}: {}\n", path, std::strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		const int err = errno;
		char text[32] = {};
		const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
		const long holder = n > 0 ? std::strtol(text, nullptr, 10) : 0;
		if (err == EWOULDBLOCK)
			fmt::print(stderr,
				   "sockbufd: another sockbufd (pid {}) serves {}; not started\n",
				   holder > 0 ? std::to_string(holder) : "unknown", dir);
		else
			fmt::print(stderr, "sockbufd: {}: flock: {}\n", path, std::strerror(err));
		close(fd);
		return -1;
	}
	const std::string pid = fmt::format("{}\n", getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size()))
		fmt::print(stderr, "sockbufd: {}: {}\n", path, std::strerror(errno));
	return fd;
}

// The directory the metrics file goes to must exist at start: a daemon
// that runs without the metrics it was asked for is found out late.
int check_metrics_file(const std::string &path)
{
	const size_t slash = path.rfind('/');
	const std::string dir =
	    slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
	struct stat st;
	errno = 0;
	if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
		fmt::print(stderr, "sockbufd: --metrics-file {}: directory {}: {}\n", path, dir,
			   std::strerror(errno ? errno : ENOTDIR));
		return -1;
	}
	return 0;
}

// WATCHDOG=1 to systemd (WatchdogSec=), at most every quarter of its
// interval, called only after a pass: a serving loop that stops making
// progress stops feeding it, and systemd restarts the daemon.
void feed_watchdog(uint64_t now_ms)
{
#ifdef SOCKBUF_HAVE_SYSTEMD
	static uint64_t every_ms = [] {
		uint64_t usec = 0;
		return sd_watchdog_enabled(0, &usec) > 0 ? usec / 4000 : 0;
	}();
	static uint64_t last_ms = 0;
	if (every_ms && now_ms >= last_ms + every_ms) {
		sd_notify(0, "WATCHDOG=1");
		last_ms = now_ms;
	}
#else
	(void)now_ms;
#endif
}

// A restore a daemon killed mid-way left (its socket's lock bits put
// back), then the journal of this daemon's restores, in the run
// directory.
void restore_journal(sockbuf::daemon::host &h)
{
	const std::string path = sockbuf::presence::dir() + "/restoring";
	for (const std::string &said : sockbuf::cli::remote::recover_journal(path))
		fmt::print(stderr, "sockbufd: {}\n", said);
	if (int err = h.journal(path))
		fmt::print(stderr,
			   "sockbufd: {}: {}; a restore cut short by a kill is not put right "
			   "at the next start\n",
			   path, std::strerror(-err));
}

// The closer threads' state and the takes refused while a user's closes
// back up, into the metrics.
void count_closes(sockbuf::daemon::metrics &m, const sockbuf::daemon::host &h,
		  uint64_t *closing_seen)
{
	const auto st = sockbuf::cli::remote::closer::get().stats();
	m.closes(st.pending, double(st.oldest_ms) / 1000.0, st.slow);
	const uint64_t closing = h.guard_totals().closing;
	if (closing > *closing_seen)
		m.refusals({}, "closing", double(closing - *closing_seen));
	*closing_seen = closing;
}

} // namespace

int main(int argc, char **argv)
{
	using namespace sockbuf::daemon;
	options opt;
	const int parsed = parse_options(argc, argv, &opt);
	if (parsed)
		return parsed == 1 ? 0 : 2;
	// A metrics reader gone away must not end the daemon.
	std::signal(SIGPIPE, SIG_IGN);

	// Blocked before any thread starts (the metrics server's): a thread
	// inherits the mask, and one that left SIGTERM unblocked would take
	// it and end the daemon without its shutdown (no STOPPING=1, the
	// presence file left, no last metrics).
	const int sfd = signal_fd();
	if (sfd < 0) {
		fmt::print(stderr, "sockbufd: signalfd: {}\n", std::strerror(errno));
		return 1;
	}
	if (!opt.metrics_file.empty() && check_metrics_file(opt.metrics_file) != 0)
		return 1;
	const int lock_fd = lock_run_dir();
	if (lock_fd < 0)
		return 1;
	metrics m;
	m.max_services(opt.max_services);
	std::string why;
	if (!opt.metrics_listen.empty() && m.listen(opt.metrics_listen, &why) != 0) {
		fmt::print(stderr, "sockbufd: --metrics-listen {}: {}\n", opt.metrics_listen, why);
		return 1;
	}
	host h(opt, m);
	restore_journal(h);
	if (h.register_err())
		fmt::print(stderr, "sockbufd: {}/register: {}; no process can register\n",
			   sockbuf::presence::dir(), std::strerror(-h.register_err()));
	h.tick(monotonic_ms());
	sockbuf::progress::writer beats;
	open_progress(&beats, opt, h);
	// `sockbuf show` tells the sockets this daemon serves by this file.
	if (int err = sockbuf::presence::announce())
		fmt::print(stderr,
			   "sockbufd: {}: {}; guards keep serving themselves and `sockbuf show` "
			   "will not name the daemon\n",
			   sockbuf::presence::file(), std::strerror(-err));
	if (!opt.metrics_file.empty())
		m.write_file(opt.metrics_file);
	notify(fmt::format("READY=1\nSTATUS=serving {} processes, {} sockets", h.processes(),
			   h.sockets()));
	if (h.events_err() == 0)
		fmt::print(stderr,
			   "sockbufd: serving {} processes, {} sockets; events on (one program "
			   "set for the host), a full pass every {} ms\n",
			   h.processes(), h.sockets(), opt.net_ms);
	else
		fmt::print(stderr,
			   "sockbufd: serving {} processes, {} sockets; events {}: {}, a pass "
			   "every {} ms\n",
			   h.processes(), h.sockets(), opt.events ? "refused" : "off",
			   opt.events ? std::strerror(-h.events_err()) : "--events off",
			   opt.interval_ms);

	uint64_t closing_seen = 0;
	uint64_t next_pass = monotonic_ms() + opt.interval_ms;
	uint64_t next_file = monotonic_ms() + 1000;
	int metrics_err = 0;
	for (;;) {
		beats.beat(); // the last iteration is done
		const uint64_t now = monotonic_ms();
		const int wait = next_pass > now ? int(next_pass - now) : 0;
		// -1 entries are skipped by poll(): no registrations, no events.
		struct pollfd fds[3] = {
		    {sfd, POLLIN, 0}, {h.register_fd(), POLLIN, 0}, {h.events_fd(), POLLIN, 0}};
		const int n = poll(fds, 3, wait);
		if (n < 0 && errno != EINTR) {
			fmt::print(stderr, "sockbufd: poll: {}\n", std::strerror(errno));
			return 1;
		}
		if (n > 0 && (fds[0].revents & POLLIN)) {
			struct signalfd_siginfo si;
			bool stop = false;
			while (read(sfd, &si, sizeof(si)) == ssize_t(sizeof(si))) {
				if (si.ssi_signo == SIGHUP)
					h.reread_all();
				else
					stop = true;
			}
			if (stop)
				break;
		}
		if (n > 0 && (fds[1].revents & POLLIN))
			h.on_register();
		if (n > 0 && (fds[2].revents & POLLIN))
			h.on_records();
		if (monotonic_ms() < next_pass)
			continue;
		h.tick(monotonic_ms());
		count_closes(m, h, &closing_seen);
		feed_watchdog(monotonic_ms());
		next_pass = monotonic_ms() + opt.interval_ms;
		if (!opt.metrics_file.empty() && monotonic_ms() >= next_file) {
			next_file = monotonic_ms() + 1000;
			const int err = m.write_file(opt.metrics_file);
			if (err && err != metrics_err)
				fmt::print(stderr, "sockbufd: {}: {}\n", opt.metrics_file,
					   std::strerror(-err));
			metrics_err = err;
			notify(fmt::format("STATUS=serving {} processes, {} sockets", h.processes(),
					   h.sockets()));
		}
	}
	notify("STOPPING=1");
	sockbuf::presence::withdraw();
	if (!opt.metrics_file.empty())
		m.write_file(opt.metrics_file);
	fmt::print(stderr, "sockbufd: stopped\n");
	close(lock_fd);
	return 0;
}
