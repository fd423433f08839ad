// SPDX-License-Identifier: MIT
#include "seam.h"

#include "sys.h"

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <mutex>

namespace sockbuf::test
{

namespace
{

std::mutex g_lock;
std::vector<fault> g_faults;
std::atomic<int> g_calls_get{0};
std::atomic<int> g_calls_set{0};

int match(bool set, int level, int name)
{
	std::lock_guard<std::mutex> guard(g_lock);
	for (auto &f : g_faults) {
		if (f.set != set || f.level != level || f.name != name)
			continue;
		if (f.skip > 0) {
			f.skip--;
			continue;
		}
		if (f.times == 0)
			continue;
		if (f.times > 0)
			f.times--;
		return -f.err;
	}
	return sys::pass;
}

int hook_get(int, int level, int name, void *, socklen_t *)
{
	g_calls_get++;
	return match(false, level, name);
}

int hook_set(int, int level, int name, const void *, socklen_t)
{
	g_calls_set++;
	return match(true, level, name);
}

const sys::hooks g_hooks = {hook_get, hook_set, nullptr};

} // namespace

injector::injector()
{
	{
		std::lock_guard<std::mutex> guard(g_lock);
		g_faults.clear();
	}
	g_calls_get = g_calls_set = 0;
	sys::set_hooks(&g_hooks);
}

injector::~injector()
{
	sys::set_hooks(nullptr);
	std::lock_guard<std::mutex> guard(g_lock);
	g_faults.clear();
}

void injector::add(const fault &f)
{
	std::lock_guard<std::mutex> guard(g_lock);
	g_faults.push_back(f);
}

int injector::calls_get() const
{
	return g_calls_get;
}
int injector::calls_set() const
{
	return g_calls_set;
}

void reprobe_real_kernel()
{
	// Hooks off first: an injector still in scope must not shape the
	// real probe.  (Its destructor removes them again, harmlessly.)
	sys::set_hooks(nullptr);
	sockbuf_probe(nullptr, SOCKBUF_PROBE_FRESH);
}

} // namespace sockbuf::test
