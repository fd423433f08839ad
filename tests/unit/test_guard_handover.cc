// SPDX-License-Identifier: MIT
// The guard's hand-over to sockbufd (SOCKBUF_GUARD_NO_DAEMON in sockbuf.h,
// impl/guard_handover.cc), against a stand-in daemon: a child process that
// lives until the test lets it go, named in a presence file of the test's
// own directory ($SOCKBUF_DAEMON_DIR).  What the real daemon does with the
// floors is tests/daemon's; here: when the guard stands down, that it
// stops restoring, that it takes its sockets back when the daemon exits
// (at once with its own thread), and which presence files it refuses.
#include "child.h"
#include "daemon_presence.h"
#include "floor_registry.h"
#include "guard_util.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace
{

using namespace sockbuf::test;
namespace presence = sockbuf::presence;

// A process that stands for the daemon, and the presence file naming it.
class fake_daemon
{
public:
	fake_daemon()
	{
		char tmpl[] = "/tmp/sockbuf-presence-XXXXXX";
		if (!mkdtemp(tmpl))
			return;
		dir_ = tmpl;
		chmod(dir_.c_str(), 0755);
		setenv("SOCKBUF_DAEMON_DIR", dir_.c_str(), 1);
		int p[2];
		if (pipe2(p, O_CLOEXEC) != 0)
			return;
		pid_ = fork();
		if (pid_ == 0) {
			char c;
			::close(p[1]);
			ssize_t r = ::read(p[0], &c, 1); // until the parent closes its end
			_exit(r == 0 ? 0 : 1);
		}
		::close(p[0]);
		release_ = p[1];
	}
	~fake_daemon()
	{
		exit();
		unlink(file().c_str());
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
	// The /dev/shm this process publishes in, as the daemon writes it.
	static std::string shm_field(bool other = false)
	{
		struct stat st = {};
		stat("/dev/shm", &st);
		return std::to_string(st.st_dev) + " " +
		       std::to_string(st.st_ino + (other ? 1 : 0));
	}
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
	static std::string line(pid_t pid, uint64_t start, uint64_t ns, bool other_shm = false)
	{
		return std::to_string(pid) + " " + std::to_string(start) + " " +
		       std::to_string(ns) + " " + shm_field(other_shm) + "\n";
	}
	// The stand-in exits and is reaped.
	void exit()
	{
		if (release_ >= 0) {
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

// A guard over one socket with a send floor, driven by a timerfd.
struct guarded {
	guard_id g;
	fd s;
	int tfd = -1;
	explicit guarded(unsigned int flags, bool drive = true) : g(flags), s(tcp())
	{
		if (g.id < 0 || sockbuf_set_initial_bufsize(s, floor_size, 0, 0, nullptr) != 0)
			return;
		struct sockbuf_floor fl = {floor_size, 0};
		if (sockbuf_guard_add(g.id, s, &fl) != 0)
			return;
		tfd = drive ? sockbuf_guard_timerfd(g.id, 1000) : 0;
	}
	bool ok() const { return g.id >= 0 && tfd >= 0; }
};

// Starts the guard thread of @gs, a daemon announced, with @interval_us and
// waits for its hand-over; @dm gets the daemon totals it then reports.
void start_served(const guarded &gs, unsigned int interval_us,
		  struct sockbuf_guard_daemon_totals *dm)
{
	ASSERT_GE(gs.g.id, 0);
	ASSERT_EQ(sockbuf_guard_start(gs.g.id, interval_us), 0);
	*dm = wait_for_handover(gs.g.id);
	ASSERT_EQ(dm->handovers, 1u) << "no hand-over within 3 s of the thread's start";
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
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	d.announce();
	guarded gs(0);
	ASSERT_TRUE(gs.ok());
	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
	struct sockbuf_guard_daemon_totals dm = daemon_of(gs.g.id);
	EXPECT_EQ(dm.pid, d.pid());
	EXPECT_EQ(dm.err, 0);
	EXPECT_EQ(dm.handovers, 1u);
	struct sockbuf_guard_totals before = {}, after = {};
	ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &before), 0);

	push_below(gs.s);
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 0) << "a served guard restored: it did not stand down";
	EXPECT_EQ(rep.below, 0) << "a served guard looked at its sockets";
	EXPECT_LT(sndbuf(gs.s), floor_size);
	ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &after), 0);
	EXPECT_EQ(after.passes, before.passes) << "a full pass ran before the net's interval";

	d.exit();
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 1) << "the daemon exited and the guard did not take over";
	EXPECT_GE(sndbuf(gs.s), floor_size);
	dm = daemon_of(gs.g.id);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.err, -ENOENT);
	EXPECT_EQ(dm.resumes, 1u);
	EXPECT_GT(dm.served_ns, 0u);
}

// While served a timerfd driver's timer still fires and its pass reads
// it: a poll loop on the fd does not spin.
TEST(GuardHandover, SkippedPassReadsTheTimer)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	d.announce();
	guarded gs(0);
	ASSERT_TRUE(gs.ok());
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, nullptr), 0);
	ASSERT_EQ(daemon_of(gs.g.id).handovers, 1u);
	struct pollfd p = {gs.tfd, POLLIN, 0};
	ASSERT_EQ(::poll(&p, 1, 2000), 1) << "the timer stopped while served";
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, nullptr), 0);
	p.revents = 0;
	EXPECT_EQ(::poll(&p, 1, 0), 0) << "a skipped pass left the timer readable";
}

// The thread driver waits on the daemon's pidfd: with a 10 s polling
// interval and the net's 60 s, only that wakeup restores a cut within 3 s
// of the daemon's exit.
TEST(GuardHandover, ThreadTakesOverAtOnceWhenTheDaemonExits)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	d.announce();
	guarded gs(0, false);
	struct sockbuf_guard_daemon_totals dm = {};
	ASSERT_NO_FATAL_FAILURE(start_served(gs, 10'000'000, &dm));
	EXPECT_EQ(dm.pid, d.pid());
	push_below(gs.s);
	const auto t0 = std::chrono::steady_clock::now();
	d.exit();
	struct sockbuf_guard_totals t = {};
	for (int i = 0; i < 3000 && t.restored == 0; i++) {
		struct pollfd none = {-1, 0, 0};
		::poll(&none, 1, 1);
		ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &t), 0);
	}
	const double took =
	    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	EXPECT_EQ(t.restored, 1u) << "not restored within 3 s of the daemon's exit";
	EXPECT_LT(took, 3.0);
	EXPECT_GE(sndbuf(gs.s), floor_size);
	EXPECT_EQ(daemon_of(gs.g.id).resumes, 1u);
}

// A served thread sleeps until the net's pass (a minute): stop() still
// ends it at once (the stop eventfd is in its wait).
TEST(GuardHandover, StopIsPromptWhileServed)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	d.announce();
	guarded gs(0, false);
	struct sockbuf_guard_daemon_totals dm = {};
	ASSERT_NO_FATAL_FAILURE(start_served(gs, 1000, &dm));
	const auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(sockbuf_guard_stop(gs.g.id), 0);
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
	    {"another /dev/shm", -EXDEV,
	     [&] { d.write(fake_daemon::line(d.pid(), d.start(), ns, true)); }},
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
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	d.announce();
	guarded gs(0, false);
	struct sockbuf_guard_daemon_totals dm = {};
	ASSERT_NO_FATAL_FAILURE(start_served(gs, 1000, &dm));
	ASSERT_EQ(sockbuf_guard_stop(gs.g.id), 0);
	dm = daemon_of(gs.g.id);
	EXPECT_EQ(dm.pid, 0);
	EXPECT_EQ(dm.resumes, 1u);
	EXPECT_EQ(dm.err, -ESRCH);
	// A manual pass restores again.
	push_below(gs.s);
	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 1);
}

// A forked child's copy of a guard serves itself: its floors are in its
// parent's table, which the daemon reads as the parent's sockets.
TEST(GuardHandover, ForkedChildsCopyServesItself)
{
	SKIP_UNLESS_ROOT_AND_BUF_LOCK();
	fake_daemon d;
	ASSERT_TRUE(d.ok());
	d.announce();
	guarded gs(SOCKBUF_GUARD_RUN_IN_CHILD, false);
	ASSERT_GE(gs.g.id, 0);
	const pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		if (sockbuf_guard_timerfd(gs.g.id, 1000) < 0)
			_exit(2);
		struct sockbuf_guard_report rep = {};
		if (sockbuf_guard_pass(gs.g.id, &rep) != 0)
			_exit(3);
		struct sockbuf_guard_daemon_totals dm = {};
		sockbuf_guard_daemon_stats(gs.g.id, &dm);
		_exit(dm.handovers == 0 && dm.err == -ECHILD ? 0 : 4);
	}
	expect_child_exited_0(child,
			      "2: no timer, 3: pass failed, 4: the child's copy handed over");
}

} // namespace
