// SPDX-License-Identifier: MIT
// The closer pool (closer.h): copies of other processes' sockets closed on
// threads of their own, with every signal blocked, so that a lingering
// last close stalls no thread that keeps floors.
#include "closer.h"
#include "test_fault.h"

#include <fmt/core.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

namespace sockbuf::cli::remote
{

namespace
{

uint64_t now_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

} // namespace

struct closer::state {
	struct job {
		int fd;
		uid_t uid;
		uint64_t since_ms;
	};
	mutable std::mutex mu;
	std::condition_variable cv;
	std::deque<job> queue;
	// The closes under way, one per busy thread (by a sequence number).
	std::map<uint64_t, job> running;
	uint64_t next_id = 0;
	std::map<uid_t, size_t> per_uid; // queued or running
	size_t threads = 0, idle = 0;
	const bool late = test_fault("close_late");
	uint64_t closed = 0, slow = 0;

	void work()
	{
		std::unique_lock<std::mutex> lk(mu);
		for (;;) {
			if (queue.empty()) {
				idle++;
				cv.wait(lk, [this] { return !queue.empty(); });
				idle--;
			}
			const job j = queue.front();
			queue.pop_front();
			const uint64_t id = next_id++;
			running.emplace(id, job{j.fd, j.uid, now_ms()});
			lk.unlock();
			// The test seam: SOCKBUF_RUN_FAULT=close_late holds each copy
			// 300 ms before its close, so that an owner's close comes
			// first at every try (the race a linger attack wins in a few).
			if (late)
				usleep(300 * 1000);
			close(j.fd); // may sleep in tcp_close() for the linger time
			const uint64_t done = now_ms();
			lk.lock();
			if (done > running[id].since_ms + slow_ms)
				slow++;
			running.erase(id);
			if (--per_uid[j.uid] == 0)
				per_uid.erase(j.uid);
			closed++;
		}
	}

	static void *run(void *arg)
	{
		static_cast<state *>(arg)->work();
		return nullptr;
	}

	// A thread more, signals blocked (the process's signals are read by
	// its main thread).  Called with mu held.
	bool start()
	{
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 64 * 1024);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_t t;
		const int err = pthread_create(&t, &attr, run, this);
		pthread_sigmask(SIG_SETMASK, &old, nullptr);
		pthread_attr_destroy(&attr);
		if (err)
			return false;
		threads++;
		return true;
	}
};

closer::closer() : s_(new state) {}

namespace
{
closer *the_pool;
} // namespace

closer &closer::get()
{
	// Never destroyed: a thread may sleep in a close() at exit.
	static closer *c = [] {
		the_pool = new closer;
		pthread_atfork(before_fork, after_fork_parent, after_fork_child);
		return the_pool;
	}();
	return *c;
}

void closer::before_fork()
{
	the_pool->s_->mu.lock();
}

void closer::after_fork_parent()
{
	the_pool->s_->mu.unlock();
}

void closer::after_fork_child()
{
	// The old state stays as it is (its mutex held, its threads gone in
	// this process): leaked, never touched again.  The copies still
	// queued are this process's duplicates too, not yet closed by
	// anyone: closed here.  Those a thread was closing at the fork may
	// or may not be in this process's table, and their numbers may name
	// something else by now: left alone (at most max_threads).
	state *old = the_pool->s_;
	auto *fresh = new state;
	fresh->closed = old->closed;
	fresh->slow = old->slow;
	for (const state::job &j : old->queue) {
		close(j.fd);
		fresh->closed++;
	}
	the_pool->s_ = fresh;
}

void closer::close_later(int fd, uid_t uid)
{
	if (fd < 0)
		return;
	std::lock_guard<std::mutex> lk(s_->mu);
	s_->queue.push_back({fd, uid, now_ms()});
	s_->per_uid[uid]++;
	// One wake-up per burst: a thread awake drains the whole queue.  A
	// thread more only when every one is asleep in a close() that takes
	// long (a linger), so that the others' copies are not held behind it.
	const uint64_t now = now_ms();
	bool all_stuck = s_->idle == 0 && !s_->running.empty();
	for (const auto &[id, j] : s_->running)
		all_stuck = all_stuck && now > j.since_ms + slow_ms;
	if (s_->threads == 0 || (all_stuck && s_->threads < max_threads)) {
		if (!s_->start() && s_->threads == 0) {
			// No thread at all (out of tasks): closed here, the old way.
			s_->queue.pop_back();
			if (--s_->per_uid[uid] == 0)
				s_->per_uid.erase(uid);
			close(fd);
			s_->closed++;
			return;
		}
	} else if (s_->idle > 0 && s_->queue.size() == 1) {
		s_->cv.notify_one();
	}
}

bool closer::backed_up(uid_t uid) const
{
	std::lock_guard<std::mutex> lk(s_->mu);
	if (s_->queue.size() + s_->running.size() >= max_total)
		return true;
	auto it = s_->per_uid.find(uid);
	if (it == s_->per_uid.end())
		return false;
	if (it->second >= max_pending)
		return true;
	const uint64_t now = now_ms();
	for (const auto &[id, j] : s_->running)
		if (j.uid == uid && now > j.since_ms + stuck_ms)
			return true;
	return false;
}

closer_stats closer::stats() const
{
	std::lock_guard<std::mutex> lk(s_->mu);
	closer_stats st;
	st.pending = s_->queue.size() + s_->running.size();
	st.threads = s_->threads;
	st.closed = s_->closed;
	st.slow = s_->slow;
	const uint64_t now = now_ms();
	for (const auto &[id, j] : s_->running)
		st.oldest_ms = std::max(st.oldest_ms, now - j.since_ms);
	for (const auto &j : s_->queue)
		st.oldest_ms = std::max(st.oldest_ms, now - j.since_ms);
	return st;
}

uid_t owner_of(pid_t pid)
{
	char path[64];
	fmt::format_to_n(path, sizeof(path) - 1, "/proc/{}/status", pid).out[0] = '\0';
	std::FILE *f = std::fopen(path, "re");
	if (!f)
		return uid_t(-1);
	char line[256];
	uid_t uid = uid_t(-1);
	while (std::fgets(line, sizeof(line), f)) {
		unsigned long real = 0;
		// The real uid: a process cannot move it to another user's, and
		// making itself non-dumpable (which gives /proc/PID to root)
		// does not change it.
		if (std::sscanf(line, "Uid: %lu", &real) == 1) {
			uid = uid_t(real);
			break;
		}
	}
	std::fclose(f);
	return uid;
}

void close_copy(int fd, pid_t pid)
{
	closer::get().close_later(fd, owner_of(pid));
}

} // namespace sockbuf::cli::remote
