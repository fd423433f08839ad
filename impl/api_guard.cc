// SPDX-License-Identifier: MIT
// The public sockbuf_guard_*() calls: ids to guards through a small table,
// then the guard does the work (guard.cc and the guard_*.cc beside it).  A call holds a reference
// to its guard, so destroying a guard while another thread uses it is safe: that call finishes on
// the guard it started with.
#include "guard.h"
#include "probe.h"

#include <sockbuf/sockbuf.h>

#include <pthread.h>

#include <array>
#include <cerrno>
#include <memory>
#include <mutex>

using sockbuf::guard::floor_guard;

namespace
{

constexpr int slots = 64;

// An id is slot + slots * generation: a destroyed guard's id never names a
// later guard in the same slot (until the generation wraps past INT_MAX).
struct slot {
	int generation = 0;
	std::shared_ptr<floor_guard> g;
};

std::mutex g_table_lock;

// Made on first use, not at load: a global with a destructor would give
// every program that links the library (and the preload shim) load-time
// code.
// Never destroyed: at exit the static destructors run while a guard's
// thread (the preloaded shim's is detached) may still be in a call that
// reads the table; a destroyed table there freed a guard twice ("double
// free or corruption" at the exit of a program under the shim's guard:
// seen once in a fresh Debian root).  The guards themselves are the
// process's until it ends.
std::array<slot, slots> &table() // guarded by g_table_lock
{
	static auto *t = new std::array<slot, slots>;
	return *t;
}

// fork(): the table and every guard's set are taken before it, so that the
// child finds them whole; the child then resets what only passes and the
// thread use (floor_guard::after_fork_child()).  Nothing waits for a pass:
// the locks taken are held only briefly by anyone.
void before_fork()
{
	g_table_lock.lock();
	for (slot &s : table())
		if (s.g)
			s.g->before_fork();
}

void after_fork_parent()
{
	for (slot &s : table())
		if (s.g)
			s.g->after_fork_parent();
	g_table_lock.unlock();
}

void after_fork_child()
{
	for (slot &s : table())
		if (s.g)
			s.g->after_fork_child();
	g_table_lock.unlock();
}

std::once_flag g_fork_handlers;

std::shared_ptr<floor_guard> find(int id)
{
	if (id < 0)
		return nullptr;
	std::lock_guard<std::mutex> lock(g_table_lock);
	const slot &s = table()[size_t(id % slots)];
	if (s.g && s.generation == id / slots)
		return s.g;
	return nullptr;
}

} // namespace

extern "C" {

int sockbuf_guard_new(unsigned int flags)
{
	int ret = sockbuf::guard::check_flags(flags);
	if (ret < 0)
		return ret;
	sockbuf::probe::facts facts;
	ret = sockbuf::probe::cached(&facts);
	if (ret < 0)
		return ret;
	std::call_once(g_fork_handlers,
		       [] { pthread_atfork(before_fork, after_fork_parent, after_fork_child); });
	std::shared_ptr<floor_guard> g;
	try {
		g = std::make_shared<floor_guard>(flags);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
	std::lock_guard<std::mutex> lock(g_table_lock);
	for (int i = 0; i < slots; i++) {
		slot &s = table()[size_t(i)];
		if (s.g)
			continue;
		s.generation = (s.generation + 1) % (0x7fffffff / slots);
		s.g = std::move(g);
		return i + slots * s.generation;
	}
	return -EMFILE;
}

int sockbuf_guard_destroy(int id)
{
	std::shared_ptr<floor_guard> g;
	{
		std::lock_guard<std::mutex> lock(g_table_lock);
		if (id < 0)
			return -EBADF;
		slot &s = table()[size_t(id % slots)];
		if (!s.g || s.generation != id / slots)
			return -EBADF;
		g = std::move(s.g);
	}
	g->stop(); // joined here, outside the table lock
	return 0;
}

int sockbuf_guard_add(int id, int fd, const struct sockbuf_floor *floor)
{
	auto g = find(id);
	if (!g)
		return -EBADF;
	if (!floor)
		return -EINVAL;
	return g->add(fd, *floor);
}

int sockbuf_guard_add_listener(int id, int fd, const struct sockbuf_floor *floor)
{
	auto g = find(id);
	if (!g)
		return -EBADF;
	if (!floor)
		return -EINVAL;
	return g->add_listener(fd, *floor);
}

int sockbuf_guard_remove(int id, int fd)
{
	auto g = find(id);
	return g ? g->remove(fd) : -EBADF;
}

int sockbuf_guard_pass(int id, struct sockbuf_guard_report *out)
{
	auto g = find(id);
	return g ? g->pass(out) : -EBADF;
}

int sockbuf_guard_start(int id, unsigned int interval_us)
{
	auto g = find(id);
	return g ? g->start(interval_us) : -EBADF;
}

int sockbuf_guard_stop(int id)
{
	auto g = find(id);
	return g ? g->stop() : -EBADF;
}

int sockbuf_guard_timerfd(int id, unsigned int interval_us)
{
	auto g = find(id);
	return g ? g->timerfd(interval_us) : -EBADF;
}

int sockbuf_guard_stats(int id, struct sockbuf_guard_totals *out)
{
	auto g = find(id);
	if (!g)
		return -EBADF;
	if (!out)
		return -EINVAL;
	g->stats(out);
	return 0;
}

int sockbuf_guard_event_stats(int id, struct sockbuf_guard_event_totals *out)
{
	auto g = find(id);
	if (!g)
		return -EBADF;
	if (!out)
		return -EINVAL;
	g->event_stats(out);
	return 0;
}

int sockbuf_guard_daemon_stats(int id, struct sockbuf_guard_daemon_totals *out)
{
	auto g = find(id);
	if (!g)
		return -EBADF;
	if (!out)
		return -EINVAL;
	g->daemon_stats(out);
	return 0;
}

int sockbuf_guard_set_net_interval(int id, unsigned int interval_us)
{
	auto g = find(id);
	return g ? g->set_net_interval(interval_us) : -EBADF;
}

} // extern "C"

#ifdef SOCKBUF_TEST_SEAM
int sockbuf::guard::lose_records_for_test(int id, uint64_t n)
{
	auto g = find(id);
	if (!g)
		return -EBADF;
	g->lose_records_for_test(n);
	return 0;
}

int sockbuf::guard::fail_clears_for_test(int id, int n)
{
	auto g = find(id);
	if (!g)
		return -EBADF;
	g->fail_clears_for_test(n);
	return 0;
}
#endif
