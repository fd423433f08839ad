// SPDX-License-Identifier: MIT
// The guard's hand-over to sockbufd (SOCKBUF_GUARD_NO_DAEMON in sockbuf.h,
// impl/guard_handover.cc), against a stand-in daemon: a child process that
// lives until the test lets it go, named in a presence file of the test's
// own directory ($SOCKBUF_DAEMON_DIR), beating its progress file
// (daemon_progress.h) every millisecond.  What the real daemon does with
// the floors is tests/daemon's; here: when the guard stands down, that it
// stops restoring, that it takes its sockets back when the daemon exits
// (at once with its own thread), stops making progress or is given a
// floor the registry cannot take, that it never stands down for a daemon
// that keeps its floors less tightly than it would, and which presence
// files it refuses.
#include "child.h"
#include "daemon_presence.h"
#include "daemon_progress.h"
#include "floor_registry.h"
#include "guard_util.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace
{

using namespace sockbuf::test;
namespace presence = sockbuf::presence;
namespace progress = sockbuf::progress;

// What the stand-in says it keeps: every kind of cut at once, as sockbufd
// with event programs on the cuts and on the write (any guard here
// qualifies, an events guard too), its loop's period 50 ms (a beat is
// stale after 105 ms: a stand-in beating every millisecond is never taken
// for stalled on a loaded host).
constexpr progress::bounds tight = {50'000, 0, 0};

// A process that stands for the daemon, and the presence file naming it.
class fake_daemon
{
public:
	explicit fake_daemon(const progress::bounds &b = tight)
	{
		char tmpl[] = "/tmp/sockbuf-presence-XXXXXX";
		if (!mkdtemp(tmpl))
			return;
		dir_ = tmpl;
		chmod(dir_.c_str(), 0755);
		setenv("SOCKBUF_DAEMON_DIR", dir_.c_str(), 1);
		progress::writer beats;
		if (beats.open(b) != 0)
			return;
		int p[2];
		if (pipe2(p, O_CLOEXEC) != 0)
			return;
		// Its registration socket: every table offered is served.
		const int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un a = {};
		a.sun_family = AF_UNIX;
		const std::string path = dir_ + "/register";
		std::memcpy(a.sun_path, path.c_str(), path.size());
		if (ls < 0 || bind(ls, reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) != 0 ||
		    listen(ls, 16) != 0)
			return;
		pid_ = fork();
		if (pid_ == 0) {
			::close(p[1]);
			// A beat a millisecond, and an answer to each registration,
			// until the parent closes its end.
			for (;;) {
				struct pollfd w[2] = {{p[0], POLLIN, 0}, {ls, POLLIN, 0}};
				const int n = ::poll(w, 2, 1);
				if (n > 0 && w[0].revents)
					_exit(0);
				if (n > 0 && w[1].revents)
					answer_one(ls);
				beats.beat();
			}
		}
		::close(ls);
		::close(p[0]);
		release_ = p[1];
	}
	// Answers 0 (served) to one registration waiting on @ls.
	static void answer_one(int ls)
	{
		const int c = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
		if (c < 0)
			return;
		char msg[64];
		alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
		struct iovec iov = {msg, sizeof(msg)};
		struct msghdr mh = {};
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = ctl;
		mh.msg_controllen = sizeof(ctl);
		if (recvmsg(c, &mh, MSG_CMSG_CLOEXEC) > 0)
			for (struct cmsghdr *m = CMSG_FIRSTHDR(&mh); m; m = CMSG_NXTHDR(&mh, m)) {
				int fd;
				std::memcpy(&fd, CMSG_DATA(m), sizeof(fd));
				::close(fd);
			}
		const int32_t served = 0;
		ssize_t n = send(c, &served, sizeof(served), MSG_NOSIGNAL);
		(void)n;
		::close(c);
	}
	~fake_daemon()
	{
		exit();
		unlink(file().c_str());
		unlink((dir_ + "/" + progress::file_name).c_str());
		unlink((dir_ + "/register").c_str());
		rmdir(dir_.c_str());
		unsetenv("SOCKBUF_DAEMON_DIR");
	}
	fake_daemon(const fake_daemon &) = delete;
	fake_daemon &operator=(const fake_daemon &) = delete;

	bool ok() const { return pid_ > 0 && !dir_.empty(); }
	pid_t pid() const { return pid_; }
	std::string file() const { return dir_ + "/serving"; }
	const std::string &dir() const { return dir_; }
	uint64_t start() const { return sockbuf::registry::process_start_time(pid_); }

	// The file as sockbufd writes it, or @text.
	void announce() { write(line(pid_, start(), presence::netns_of("/proc/self"))); }
	// A new file each time: one case's owner or mode never carries over.
	void write(const std::string &text) const
	{
		unlink(file().c_str());
		FILE *f = fopen(file().c_str(), "w");
		ASSERT_NE(f, nullptr);
		fputs(text.c_str(), f);
		fclose(f);
		chmod(file().c_str(), 0644);
	}
	// The daemon's line (presence::line_of()) naming @pid, @start and
	// namespace @ns, and the /dev/shm this process publishes in (another
	// with @other_shm).
	static std::string line(pid_t pid, uint64_t start, uint64_t ns, bool other_shm = false)
	{
		struct stat st = {};
		stat("/dev/shm", &st);
		return presence::line_of({pid, start, ns, uint64_t(st.st_dev),
					  uint64_t(st.st_ino) + (other_shm ? 1 : 0)});
	}
	// The stand-in stops (SIGSTOP) or goes on (SIGCONT).
	void signal(int sig) const { kill(pid_, sig); }
	// The stand-in exits and is reaped.
	void exit()
	{
		if (release_ >= 0) {
			kill(pid_, SIGCONT);
			::close(release_);
			release_ = -1;
			int status;
			waitpid(pid_, &status, 0);
		}
	}

private:
	std::string dir_;
	pid_t pid_ = -1;
	int release_ = -1;
};

struct sockbuf_guard_daemon_totals daemon_of(int guard)
{
	struct sockbuf_guard_daemon_totals d = {};
	EXPECT_EQ(sockbuf_guard_daemon_stats(guard, &d), 0);
	return d;
}

// A guard driven by its own thread: its totals once it has handed over,
// or as they stand after 3 s (bounded, 1 ms apart).
struct sockbuf_guard_daemon_totals wait_for_handover(int guard)
{
	struct sockbuf_guard_daemon_totals dm = {};
	for (int i = 0; i < 3000 && dm.handovers == 0; i++) {
		struct pollfd none = {-1, 0, 0};
		::poll(&none, 1, 1);
		dm = daemon_of(guard);
	}
	return dm;
}

// A guard over one socket at its send floor, driven by a timerfd when
// @drive.
struct guarded : guarded_socket {
	int tfd = -1;
	explicit guarded(unsigned int flags, bool drive = true) : guarded_socket(flags, true)
	{
		if (added)
			tfd = drive ? sockbuf_guard_timerfd(g.id, 1000) : 0;
	}
	bool ok() const { return added && tfd >= 0; }
};

// What most tests here start from: a stand-in daemon, announced (its
// presence file written), then a guard of @flags over one socket
// (guarded: timerfd-driven when @drive).  ok(): both are up.
struct announced {
	fake_daemon d;
	guarded gs;
	struct sockbuf_guard_daemon_totals handed_over = {};
	explicit announced(unsigned int flags, bool drive = true)
	    : gs(announce_then(d, flags), drive)
	{
	}
	bool ok() const { return d.ok() && gs.ok(); }
	// Starts the guard's thread with @interval_us and waits for its
	// hand-over; handed_over gets the daemon totals it then reports.
	// The pass that hands over still runs to its end (the daemon may not
	// have read the table yet), and a cut made before it ends may be
	// restored by it: the wait lasts until that pass is counted.
	void serve(unsigned int interval_us)
	{
		ASSERT_TRUE(ok());
		ASSERT_EQ(sockbuf_guard_start(gs.g.id, interval_us), 0);
		handed_over = wait_for_handover(gs.g.id);
		ASSERT_EQ(handed_over.handovers, 1u)
		    << "no hand-over within 3 s of the thread's start";
		struct sockbuf_guard_totals t = {};
		for (int i = 0; i < 3000 && t.passes == 0; i++) {
			ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &t), 0);
			if (t.passes == 0) {
				struct pollfd none = {-1, 0, 0};
				::poll(&none, 1, 1);
			}
		}
		ASSERT_EQ(t.passes, 1u) << "the hand-over's pass did not end within 3 s";
	}
	// The caller's first pass hands the guard over.
	void pass_hands_over() const
	{
		ASSERT_EQ(sockbuf_guard_pass(gs.g.id, nullptr), 0);
		ASSERT_EQ(daemon_of(gs.g.id).handovers, 1u);
	}

private:
	static unsigned int announce_then(fake_daemon &d, unsigned int flags)
	{
		if (d.ok())
			d.announce();
		return flags;
	}
};

// Polls @done every millisecond for at most @seconds; whether it held.
template <class F> bool within(double seconds, F done)
{
	const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
	while (!done()) {
		if (std::chrono::steady_clock::now() >= end)
			return false;
		struct pollfd none = {-1, 0, 0};
		::poll(&none, 1, 1);
	}
	return true;
}

// More sockets than a process's floor table has slots
// (registry::slot_count), each added to a guard: at least one floor is
// not published.  RLIMIT_NOFILE is raised for them while this lives.
class unpublishable
{
public:
	static constexpr size_t count = sockbuf::registry::slot_count;

	unpublishable()
	{
		if (getrlimit(RLIMIT_NOFILE, &old_) != 0) {
			why_ = std::string("getrlimit: ") + strerror(errno);
			return;
		}
		const rlim_t want = count + 256; // the guard's, gtest's, the test's own
		if (old_.rlim_cur < want) {
			struct rlimit more = {want, std::max(want, old_.rlim_max)};
			if (setrlimit(RLIMIT_NOFILE, &more) != 0) {
				why_ = "RLIMIT_NOFILE is " + std::to_string(old_.rlim_cur) +
				       " and could not be raised to " + std::to_string(want) +
				       " (" + strerror(errno) + "): the floor table (" +
				       std::to_string(count) + " slots) cannot be filled";
				return;
			}
			raised_ = true;
		}
		socks_.reserve(count);
		for (size_t i = 0; i < count; i++) {
			const int s = tcp();
			if (s < 0) {
				why_ = std::string("socket: ") + strerror(errno);
				return;
			}
			socks_.push_back(s);
		}
	}
	~unpublishable()
	{
		for (int s : socks_)
			::close(s);
		if (raised_)
			setrlimit(RLIMIT_NOFILE, &old_);
	}
	unpublishable(const unpublishable &) = delete;
	unpublishable &operator=(const unpublishable &) = delete;

	// Why the sockets could not be made ("" when they are).
	const std::string &missing() const { return why_; }
	// Adds them all to @guard with a floor they are above (no restores).
	void add_to(int guard) const
	{
		const struct sockbuf_floor fl = {4096, 0};
		for (int s : socks_)
			ASSERT_EQ(sockbuf_guard_add(guard, s, &fl), 0);
	}

private:
	struct rlimit old_ = {};
	bool raised_ = false;
	std::vector<int> socks_;
	std::string why_;
};

// The event source of a guard: 0 while it drives the guard.
int events_err(int guard)
{
	struct sockbuf_guard_event_totals ev = {};
	EXPECT_EQ(sockbuf_guard_event_stats(guard, &ev), 0);
	return ev.err;
}

#define SKIP_UNLESS_ROOT_AND_BUF_LOCK()                                                            \
	do {                                                                                       \
		if (geteuid() != 0)                                                                \
			GTEST_SKIP() << "the presence file must be root's: run as root";           \
		if (!has_buf_lock())                                                               \
			GTEST_SKIP() << "kernel has no SO_BUF_LOCK: a send floor cannot be "       \
					"restored unlocked";                                       \
	} while (0)

// Served, the guard's passes leave a cut socket alone (the daemon's job);
// the pass after the daemon exits takes the socket back and restores it.
TEST(GuardHandover, StandsDownWhileServedAndResumesWhenTheDaemonExits)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(0);
	ASSERT_TRUE(a.ok());
	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(a.gs.g.id, &rep), 0);
	struct sockbuf_guard_daemon_totals dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.pid, a.d.pid());
	EXPECT_EQ(dm.err, 0);
	EXPECT_EQ(dm.handovers, 1u);
	struct sockbuf_guard_totals before = {}, after = {};
	ASSERT_EQ(sockbuf_guard_stats(a.gs.g.id, &before), 0);

	push_below(a.gs.s);
	ASSERT_EQ(sockbuf_guard_pass(a.gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 0) << "a served guard restored: it did not stand down";
	EXPECT_EQ(rep.below, 0) << "a served guard looked at its sockets";
	EXPECT_LT(sndbuf(a.gs.s), floor_size);
	ASSERT_EQ(sockbuf_guard_stats(a.gs.g.id, &after), 0);
	EXPECT_EQ(after.passes, before.passes) << "a full pass ran before the net's interval";

	a.d.exit();
	ASSERT_EQ(sockbuf_guard_pass(a.gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 1) << "the daemon exited and the guard did not take over";
	EXPECT_GE(sndbuf(a.gs.s), floor_size);
	dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.err, -ENOENT);
	EXPECT_EQ(dm.resumes, 1u);
	EXPECT_GT(dm.served_ns, 0u);
}

// A daemon that stops making progress (SIGSTOP: alive, its pidfd not
// readable) is not trusted with the floors: once its beat is stale (105 ms
// here) the guard's next look takes its sockets back and restores, not
// the safety net's pass a minute later.
TEST(GuardHandover, ResumesWhenTheDaemonStopsMakingProgress)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(0, false);
	ASSERT_NO_FATAL_FAILURE(a.serve(10'000));
	a.d.signal(SIGSTOP);
	push_below(a.gs.s);
	const auto t0 = std::chrono::steady_clock::now();
	EXPECT_TRUE(within(3.0, [&] { return sndbuf(a.gs.s) >= floor_size; }))
	    << "the daemon stopped and the guard did not take its socket back within 3 s";
	const double took =
	    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	EXPECT_LT(took, 0.6) << "the staleness (105 ms) and the guard's 10 ms, plus slack";
	const struct sockbuf_guard_daemon_totals dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.err, -ETIMEDOUT);
	EXPECT_EQ(dm.resumes, 1u);
	a.d.signal(SIGCONT);
	EXPECT_EQ(sockbuf_guard_stop(a.gs.g.id), 0);
}

// A daemon that sees some kind of cut later than the guard would (here a
// setsockopt() cut within 100 ms, against a guard polling every 1 ms), or
// that proves no progress at all (no progress file: sockbufd 0.5), does
// not get the floors: the guard keeps restoring and says why.
TEST(GuardHandover, NeverStandsDownForALooserDaemon)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	for (const bool file : {true, false}) {
		SCOPED_TRACE(file ? "bounds looser than the guard's" : "no progress file");
		fake_daemon d({50'000, 1000, 100'000});
		ASSERT_TRUE(d.ok());
		d.announce();
		if (!file) {
			ASSERT_EQ(unlink((d.dir() + "/" + progress::file_name).c_str()), 0);
		}
		guarded gs(0);
		ASSERT_TRUE(gs.ok());
		struct sockbuf_guard_report rep = {};
		ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
		const struct sockbuf_guard_daemon_totals dm = daemon_of(gs.g.id);
		EXPECT_EQ(dm.handovers, 0u);
		EXPECT_EQ(dm.pid, 0);
		EXPECT_EQ(dm.err, file ? -ERANGE : -ENOENT);
		push_below(gs.s);
		ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
		EXPECT_EQ(rep.restored, 1)
		    << "the guard stood down for a daemon that does not qualify";
	}
}

// While served a timerfd driver's timer still fires and its pass reads
// it: a poll loop on the fd does not spin.
TEST(GuardHandover, SkippedPassReadsTheTimer)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(0);
	ASSERT_TRUE(a.ok());
	ASSERT_NO_FATAL_FAILURE(a.pass_hands_over());
	struct pollfd p = {a.gs.tfd, POLLIN, 0};
	ASSERT_EQ(::poll(&p, 1, 2000), 1) << "the timer stopped while served";
	ASSERT_EQ(sockbuf_guard_pass(a.gs.g.id, nullptr), 0);
	p.revents = 0;
	EXPECT_EQ(::poll(&p, 1, 0), 0) << "a skipped pass left the timer readable";
}

// The thread driver waits on the daemon's pidfd: with a 10 s polling
// interval and the net's 60 s, only that wakeup restores a cut within 3 s
// of the daemon's exit.
TEST(GuardHandover, ThreadTakesOverAtOnceWhenTheDaemonExits)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(0, false);
	ASSERT_NO_FATAL_FAILURE(a.serve(10'000'000));
	EXPECT_EQ(a.handed_over.pid, a.d.pid());
	push_below(a.gs.s);
	const auto t0 = std::chrono::steady_clock::now();
	a.d.exit();
	struct sockbuf_guard_totals t = {};
	for (int i = 0; i < 3000 && t.restored == 0; i++) {
		struct pollfd none = {-1, 0, 0};
		::poll(&none, 1, 1);
		ASSERT_EQ(sockbuf_guard_stats(a.gs.g.id, &t), 0);
	}
	const double took =
	    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	EXPECT_EQ(t.restored, 1u) << "not restored within 3 s of the daemon's exit";
	EXPECT_LT(took, 3.0);
	EXPECT_GE(sndbuf(a.gs.s), floor_size);
	EXPECT_EQ(daemon_of(a.gs.g.id).resumes, 1u);
}

// A served thread waits on the daemon's pidfd and the stop eventfd until
// its next look at the daemon: stop() still ends it at once.
TEST(GuardHandover, StopIsPromptWhileServed)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(0, false);
	ASSERT_NO_FATAL_FAILURE(a.serve(1000));
	const auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(sockbuf_guard_stop(a.gs.g.id), 0);
	const double took =
	    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	EXPECT_LT(took, 1.0) << "stop() waited for the served thread's net pass";
}

// Presence files a guard must not trust, and guards that must not hand
// over: each keeps serving itself and says why.
TEST(GuardHandover, RefusesWhatIsNotALiveRootDaemonOfItsNamespace)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	const uint64_t ns = presence::netns_of("/proc/self");
	struct refusal {
		const char *what;
		int err;
		std::function<void()> set; // the file (and directory) for this case
		unsigned int flags = 0;
		bool drive = true;
	};
	const std::vector<refusal> cases = {
	    {"no file", -ENOENT, [&] { unlink(d.file().c_str()); }},
	    {"file not root's", -EPERM,
	     [&] {
		     d.announce();
		     ASSERT_EQ(chown(d.file().c_str(), 65534, 65534), 0);
	     }},
	    {"file writable by others", -EPERM,
	     [&] {
		     d.announce();
		     chmod(d.file().c_str(), 0666);
	     }},
	    {"directory writable by others", -EPERM,
	     [&] {
		     d.announce();
		     chmod(d.dir().c_str(), 0777);
	     }},
	    {"a symbolic link", -EPERM,
	     [&] {
		     chmod(d.dir().c_str(), 0755);
		     const std::string real = d.dir() + "/real";
		     d.announce();
		     ASSERT_EQ(rename(d.file().c_str(), real.c_str()), 0);
		     ASSERT_EQ(symlink(real.c_str(), d.file().c_str()), 0);
	     }},
	    {"garbage", -EINVAL,
	     [&] {
		     unlink(d.file().c_str());
		     d.write("sockbufd is here\n");
	     }},
	    {"another network namespace", -EXDEV,
	     [&] { d.write(fake_daemon::line(d.pid(), d.start(), ns + 1)); }},
	    {"no registration socket: the table cannot be handed over", -ENOENT,
	     [&] {
		     d.announce();
		     unlink((d.dir() + "/register").c_str());
	     }},
	    {"the format of 0.4 (no /dev/shm)", -EINVAL,
	     [&] {
		     d.write(std::to_string(d.pid()) + " " + std::to_string(d.start()) + " " +
			     std::to_string(ns) + "\n");
	     }},
	    {"a number now another process's", -ENOENT,
	     [&] { d.write(fake_daemon::line(d.pid(), d.start() + 1, ns)); }},
	    {"SOCKBUF_GUARD_NO_DAEMON", -EPERM, [&] { d.announce(); }, SOCKBUF_GUARD_NO_DAEMON},
	    {"no driver", -ESRCH, [&] { d.announce(); }, 0, false},
	};
	for (const refusal &c : cases) {
		SCOPED_TRACE(c.what);
		ASSERT_NO_FATAL_FAILURE(c.set());
		guarded gs(c.flags, c.drive);
		ASSERT_TRUE(gs.ok());
		push_below(gs.s);
		struct sockbuf_guard_report rep = {};
		ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
		EXPECT_EQ(rep.restored, 1) << "the guard stood down";
		const struct sockbuf_guard_daemon_totals dm = daemon_of(gs.g.id);
		EXPECT_EQ(dm.pid, 0);
		EXPECT_EQ(dm.err, c.err);
		EXPECT_EQ(dm.handovers, 0u);
	}
}

// A process that is not dumpable (it changed credentials) has a root-owned
// /proc/PID: the daemon would refuse its table, so its guard keeps
// serving itself.
TEST(GuardHandover, NotDumpableServesItself)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	d.announce();
	ASSERT_EQ(prctl(PR_SET_DUMPABLE, 0), 0);
	guarded gs(0);
	const int pass = gs.ok() ? sockbuf_guard_pass(gs.g.id, nullptr) : -1;
	const struct sockbuf_guard_daemon_totals dm = daemon_of(gs.g.id);
	prctl(PR_SET_DUMPABLE, 1);
	ASSERT_EQ(pass, 0);
	EXPECT_EQ(dm.handovers, 0u);
	EXPECT_EQ(dm.err, -EACCES);
}

// After sockbuf_guard_stop() the guard is its own again at once.
TEST(GuardHandover, StopTakesTheSocketsBack)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(0, false);
	ASSERT_NO_FATAL_FAILURE(a.serve(1000));
	ASSERT_EQ(sockbuf_guard_stop(a.gs.g.id), 0);
	const struct sockbuf_guard_daemon_totals dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.resumes, 1u);
	EXPECT_EQ(dm.err, -ESRCH);
	// A manual pass restores again.
	push_below(a.gs.s);
	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(a.gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 1);
}

// A forked child's copy of a guard serves itself: its floors are in its
// parent's table, which the daemon reads as the parent's sockets.
TEST(GuardHandover, ForkedChildsCopyServesItself)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(SOCKBUF_GUARD_RUN_IN_CHILD, false);
	ASSERT_TRUE(a.d.ok());
	ASSERT_GE(a.gs.g.id, 0);
	const pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		if (sockbuf_guard_timerfd(a.gs.g.id, 1000) < 0)
			_exit(2);
		struct sockbuf_guard_report rep = {};
		if (sockbuf_guard_pass(a.gs.g.id, &rep) != 0)
			_exit(3);
		struct sockbuf_guard_daemon_totals dm = {};
		sockbuf_guard_daemon_stats(a.gs.g.id, &dm);
		_exit(dm.handovers == 0 && dm.err == -ECHILD ? 0 : 4);
	}
	expect_child_exited_0(child,
			      "2: no timer, 3: pass failed, 4: the child's copy handed over");
}

} // namespace

namespace
{

// A served guard given a floor the registry cannot take (its table full:
// more sockets than it has slots) takes its sockets back at once
// (sockbuf_guard_new(3), "The host daemon"), says -ENOSPC, restores at the
// pass that follows, loads its event programs again where they were on,
// and polls at its own interval again.  Run without and with
// SOCKBUF_GUARD_EVENTS (a reported skip where BPF events are missing).
class GuardHandoverUnpublished : public ::testing::TestWithParam<unsigned int>
{
protected:
	void SetUp() override
	{
		SKIP_UNLESS_ROOT_AND_BUF_LOCK();
		if (GetParam() & SOCKBUF_GUARD_EVENTS) {
			guard_id g(SOCKBUF_GUARD_EVENTS);
			ASSERT_GE(g.id, 0);
			if (const int err = events_err(g.id))
				GTEST_SKIP() << "BPF events unavailable: " << strerror(-err);
		}
		if (!many_.missing().empty())
			GTEST_SKIP() << many_.missing();
	}
	unpublishable many_;
};

// The thread driver: while served it sleeps until the net's pass (60 s)
// and wakes only on the daemon's exit or on add()'s wakeup.  Its polling
// interval is 50 ms: after the resume, passes every 50 ms again.
TEST_P(GuardHandoverUnpublished, ThreadTakesTheSocketsBackAtOnce)
{
	const bool events = GetParam() & SOCKBUF_GUARD_EVENTS;
	announced a(GetParam(), false);
	ASSERT_NO_FATAL_FAILURE(a.serve(50'000));
	if (events) {
		EXPECT_EQ(events_err(a.gs.g.id), -EBUSY) << "served, the programs are still loaded";
	}
	push_below(a.gs.s);
	ASSERT_NO_FATAL_FAILURE(many_.add_to(a.gs.g.id));
	const auto t0 = std::chrono::steady_clock::now();
	EXPECT_TRUE(within(3.0, [&] { return daemon_of(a.gs.g.id).resumes > 0; }))
	    << "a floor not published and the guard still stood down 3 s later";
	const double took =
	    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	struct sockbuf_guard_daemon_totals dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.resumes, 1u);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.err, -ENOSPC);
	struct sockbuf_guard_totals t = {};
	EXPECT_TRUE(within(3.0, [&] {
		EXPECT_EQ(sockbuf_guard_stats(a.gs.g.id, &t), 0);
		return t.restored > 0;
	})) << "taken back, and the cut not restored within 3 s";
	EXPECT_GE(sndbuf(a.gs.s), floor_size);
	if (events) {
		EXPECT_TRUE(within(3.0, [&] { return events_err(a.gs.g.id) == 0; }))
		    << "the event programs were not loaded again";
	} else {
		// Passes at its own 50 ms again, not the net's 60 s.
		const uint64_t passes = t.passes;
		EXPECT_TRUE(within(3.0, [&] {
			EXPECT_EQ(sockbuf_guard_stats(a.gs.g.id, &t), 0);
			return t.passes >= passes + 3;
		})) << "no passes at the polling interval after the resume";
	}
	// Still the guard's: a floor not published keeps it from standing down.
	dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.handovers, 1u);
	EXPECT_EQ(dm.pid, 0);
	RecordProperty("resume_after_ms", int(took * 1000));
	EXPECT_EQ(sockbuf_guard_stop(a.gs.g.id), 0);
}

// The timerfd driver, at a 10 s polling interval (the net's 60 s with
// events): add() brings the timer forward, so the caller's next pass,
// now, takes the sockets back and restores.
TEST_P(GuardHandoverUnpublished, TimerfdTakesTheSocketsBackAtOnce)
{
	const bool events = GetParam() & SOCKBUF_GUARD_EVENTS;
	announced a(GetParam(), false);
	ASSERT_TRUE(a.d.ok());
	ASSERT_GE(a.gs.g.id, 0);
	// With events the timer is the safety net's; a short polling
	// interval shows a wake that left the timer at it after the resume.
	const unsigned int poll_us = events ? 100'000 : 10'000'000;
	const int tfd = sockbuf_guard_timerfd(a.gs.g.id, poll_us);
	ASSERT_GE(tfd, 0);
	ASSERT_NO_FATAL_FAILURE(a.pass_hands_over());
	push_below(a.gs.s);
	ASSERT_NO_FATAL_FAILURE(many_.add_to(a.gs.g.id));
	// The caller's loop: a pass each time its fd is readable.
	int restored = 0;
	EXPECT_TRUE(within(3.0, [&] {
		struct pollfd p = {tfd, POLLIN, 0};
		if (::poll(&p, 1, 0) == 1) {
			struct sockbuf_guard_report rep = {};
			EXPECT_EQ(sockbuf_guard_pass(a.gs.g.id, &rep), 0);
			restored += rep.restored;
		}
		return daemon_of(a.gs.g.id).resumes > 0;
	})) << "a floor not published and the guard still stood down 3 s later";
	EXPECT_EQ(restored, 1) << "the pass that took the sockets back did not restore";
	EXPECT_GE(sndbuf(a.gs.s), floor_size);
	const struct sockbuf_guard_daemon_totals dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.resumes, 1u);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.err, -ENOSPC);
	if (events) {
		EXPECT_EQ(events_err(a.gs.g.id), 0) << "the event programs were not loaded again";
		// Nothing is cut now, so nothing makes the epoll fd readable
		// for a second: the timer is back at the safety net's period
		// (a minute), not the polling interval the wake used.
		struct sockbuf_guard_totals before = {}, after = {};
		ASSERT_EQ(sockbuf_guard_stats(a.gs.g.id, &before), 0);
		const auto extra_passes = [&] {
			struct pollfd p = {tfd, POLLIN, 0};
			if (::poll(&p, 1, 0) == 1) {
				EXPECT_EQ(sockbuf_guard_pass(a.gs.g.id, nullptr), 0);
			}
			EXPECT_EQ(sockbuf_guard_stats(a.gs.g.id, &after), 0);
			return after.passes > before.passes + 1;
		};
		EXPECT_FALSE(within(1.0, extra_passes))
		    << "after the resume a full pass at every " << poll_us
		    << " us tick: the timer kept the wake's period";
	} else {
		// The caller's timer polls at its own interval again.
		struct itimerspec its = {};
		ASSERT_EQ(timerfd_gettime(tfd, &its), 0);
		EXPECT_EQ(its.it_interval.tv_sec, time_t(poll_us / 1'000'000));
		EXPECT_EQ(its.it_interval.tv_nsec, 0);
	}
}

INSTANTIATE_TEST_SUITE_P(Drivers, GuardHandoverUnpublished,
			 ::testing::Values(0u, SOCKBUF_GUARD_EVENTS),
			 [](const ::testing::TestParamInfo<unsigned int> &i) {
				 return std::string(i.param ? "Events" : "Polling");
			 });

} // namespace

// sockbufd does not follow listeners: a served guard that starts watching
// one takes its sockets back at its next pass and hands over no more.
TEST(GuardHandover, WatchingAListenerServesItself)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	announced a(0);
	ASSERT_TRUE(a.ok());
	ASSERT_NO_FATAL_FAILURE(a.pass_hands_over());

	fd l(tcp());
	struct sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
	ASSERT_EQ(::listen(l, 4), 0);
	struct sockbuf_floor fl = {floor_size, 0};
	ASSERT_EQ(sockbuf_guard_add_listener(a.gs.g.id, l, &fl), 0);
	push_below(a.gs.s);
	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(a.gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 1) << "the guard stayed served though it watches a listener";
	EXPECT_GE(sndbuf(a.gs.s), floor_size);
	struct sockbuf_guard_daemon_totals dm = daemon_of(a.gs.g.id);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.resumes, 1u);
	ASSERT_EQ(sockbuf_guard_pass(a.gs.g.id, nullptr), 0);
	EXPECT_EQ(daemon_of(a.gs.g.id).handovers, 1u) << "handed over again";
}
