// SPDX-License-Identifier: MIT
#include "guard.h"

#include "fdtable.h"
#include "log.h"

#include <sockbuf/sockbuf.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include <atomic>
#include <vector>

namespace sockbuf::shim
{

namespace
{

struct registered {
	uint64_t cookie = 0;
	int floor[2] = {0, 0};
};

// Brings the guard's membership in line with the fd table: sockets with a
// floor are added (again, if their floor changed or the fd now names
// another socket), sockets without one leave.  Closed sockets leave the
// guard by themselves during its pass.
void sync(int guard, std::vector<registered> *known)
{
	const int end = fd_high_water();
	if (int(known->size()) < end)
		known->resize(size_t(end));
	for (int fd = 0; fd < end; fd++) {
		const fd_state *e = fd_slot(fd);
		registered now;
		now.cookie = e->cookie.load(std::memory_order_acquire);
		now.floor[0] = e->floor[0].load(std::memory_order_relaxed);
		now.floor[1] = e->floor[1].load(std::memory_order_relaxed);
		if (now.floor[0] == 0 && now.floor[1] == 0)
			now.cookie = 0; // nothing to guard
		registered &k = (*known)[size_t(fd)];
		if (k.cookie == now.cookie && k.floor[0] == now.floor[0] &&
		    k.floor[1] == now.floor[1])
			continue;
		if (k.cookie)
			sockbuf_guard_remove(guard, fd); // -ENOENT if it closed: fine
		k = registered{};
		if (!now.cookie)
			continue;
		struct sockbuf_floor fl = {now.floor[0], now.floor[1]};
		if (sockbuf_guard_add(guard, fd, &fl) == 0)
			k = now;
	}
}

struct thread_args {
	int interval_ms;
	unsigned int flags;
};
thread_args g_args;

// This process's guard, -1 before its thread made it.  A forked child
// inherits the parent's id with the guard's copy; its own thread destroys
// that copy (whose passes would refuse to run there: -ECHILD) and makes
// the child's own.
std::atomic<int> g_guard{-1};

// One log line: where the guard's passes read, and whether events drive
// it or why not ("events refused: EPERM, polling every 10 ms").
void say_source(int guard)
{
	if (!log::enabled())
		return;
	log::line l;
	l.s("floor guard: ");
	struct sockbuf_guard_event_totals ev = {};
	const bool asked = g_args.flags & SOCKBUF_GUARD_EVENTS;
	const bool on = asked && sockbuf_guard_event_stats(guard, &ev) == 0 && ev.err == 0;
	if (on) {
		l.s("events on, safety-net passes every ").i(ev.net_interval_us / 1000).s(" ms");
	} else {
		const char *name = asked ? strerrorname_np(-ev.err) : nullptr;
		l.s(!asked ? "events off" : "events refused: ").s(asked ? (name ? name : "?") : "");
		l.s(", polling every ").i(g_args.interval_ms).s(" ms");
	}
	if (g_args.flags & SOCKBUF_GUARD_BPF)
		l.s("; passes by BPF iterator where it loads");
	l.emit();
}

// One log line when sockbufd starts or stops serving this process's
// floors (the guard hands over and takes back by itself: the library's
// SOCKBUF_GUARD_NO_DAEMON).  @handovers: the count last said.
void say_handover(int guard, uint32_t *handovers, uint32_t *resumes)
{
	struct sockbuf_guard_daemon_totals d = {};
	if (!log::enabled() || sockbuf_guard_daemon_stats(guard, &d) != 0 ||
	    (d.handovers == *handovers && d.resumes == *resumes))
		return;
	*handovers = d.handovers;
	*resumes = d.resumes;
	log::line l;
	if (d.pid > 0)
		l.s("floor guard: sockbufd (pid ")
		    .i(d.pid)
		    .s(") serves these floors; own passes at the safety net's interval");
	else if (d.err == -ETIMEDOUT)
		l.s("floor guard: sockbufd made no progress (stopped, hung or overloaded), "
		    "the guard serves these floors again");
	else if (d.err == -ERANGE)
		l.s("floor guard: sockbufd keeps these floors less tightly than this guard, "
		    "the guard serves them again");
	else
		l.s("floor guard: sockbufd gone, the guard serves these floors again");
	l.emit();
}

// Whether any socket of this process has a floor now.
bool any_floor()
{
	const int end = fd_high_water();
	for (int fd = 0; fd < end; fd++) {
		const fd_state *e = fd_slot(fd);
		if (e->floor[0].load(std::memory_order_relaxed) ||
		    e->floor[1].load(std::memory_order_relaxed))
			return true;
	}
	return false;
}

void *run(void *)
{
	// Host signals are the host's business: never run a handler here.
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, nullptr);
	prctl(PR_SET_NAME, "sockbuf-guard");
	const int inherited = g_guard.exchange(-1);
	if (inherited >= 0)
		sockbuf_guard_destroy(inherited);
	// No guard, and so no BPF programs loaded and attached, until this
	// process has a socket to guard: a program's children that never set
	// a floor (a build's compilers, a shell's commands, a pre-fork
	// server's helpers) pay one scan of the fd table per interval.
	while (!any_floor())
		poll(nullptr, 0, g_args.interval_ms);
	int guard = sockbuf_guard_new(g_args.flags);
	if (guard < 0)
		return nullptr;
	g_guard.store(guard);
	say_source(guard);
	std::vector<registered> known;
	// The guard's fd: readable when a pass is due (the polling timer) or,
	// with events on, when records wait or the safety net's timer fired.
	// The membership is synced on every wakeup and at least every
	// interval.
	const int tfd = sockbuf_guard_timerfd(guard, unsigned(g_args.interval_ms) * 1000u);
	uint32_t handovers = 0, resumes = 0;
	if (tfd >= 0)
		for (;;) {
			sync(guard, &known);
			struct pollfd p = {tfd, POLLIN, 0};
			if (poll(&p, 1, g_args.interval_ms) > 0 && (p.revents & POLLIN)) {
				sockbuf_guard_pass(guard, nullptr);
				say_handover(guard, &handovers, &resumes);
			}
		}
	// No timer (timerfd_create refused): passes on a clock of our own.
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		sync(guard, &known);
		sockbuf_guard_pass(guard, nullptr);
		next.tv_nsec += long(g_args.interval_ms % 1000) * 1'000'000;
		next.tv_sec += g_args.interval_ms / 1000 + next.tv_nsec / 1'000'000'000;
		next.tv_nsec %= 1'000'000'000;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
	}
	return nullptr;
}

bool start_thread()
{
	pthread_attr_t attr;
	if (pthread_attr_init(&attr) != 0)
		return false;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	bool ok = pthread_create(&t, &attr, run, nullptr) == 0;
	pthread_attr_destroy(&attr);
	return ok;
}

// A forked child has only the thread that forked: pre-fork servers
// (nginx, rsync's daemon, preforking RPC servers) would run their workers
// unguarded.  Each child gets a guard thread of its own, for the sockets
// it inherited and those it makes; a child that execs loses it with the
// rest of its image (the new program loads the shim again).
void start_in_child()
{
	start_thread();
}

} // namespace

bool start_floor_guard(int interval_ms, unsigned int flags)
{
	g_args.interval_ms = interval_ms;
	g_args.flags = flags;
	if (!start_thread())
		return false;
	pthread_atfork(nullptr, nullptr, start_in_child);
	return true;
}

} // namespace sockbuf::shim
