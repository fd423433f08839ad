// SPDX-License-Identifier: MIT
#include "seam.h"

#include "sys.h"

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace sockbuf::test
{

namespace
{

std::mutex g_lock;
std::vector<fault> g_faults;
std::atomic<int> g_calls_get{0};
std::atomic<int> g_calls_set{0};
struct recorded {
	int level, name, value;
};
std::vector<recorded> g_set_values; // guarded by g_lock

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

int hook_set(int, int level, int name, const void *val, socklen_t len)
{
	g_calls_set++;
	if (val && len == sizeof(int)) {
		int v = 0;
		std::memcpy(&v, val, sizeof(v));
		std::lock_guard<std::mutex> guard(g_lock);
		g_set_values.push_back({level, name, v});
	}
	return match(true, level, name);
}

const sys::hooks g_hooks = {hook_get, hook_set, nullptr, nullptr};

} // namespace

injector::injector()
{
	{
		std::lock_guard<std::mutex> guard(g_lock);
		g_faults.clear();
		g_set_values.clear();
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

std::vector<int> injector::values_set(int level, int name) const
{
	std::lock_guard<std::mutex> guard(g_lock);
	std::vector<int> out;
	for (const auto &r : g_set_values)
		if (r.level == level && r.name == name)
			out.push_back(r.value);
	return out;
}

void reprobe_real_kernel()
{
	// Hooks off first: an injector still in scope must not shape the
	// real probe.  (Its destructor removes them again, harmlessly.)
	sys::set_hooks(nullptr);
	sockbuf_probe(nullptr, SOCKBUF_PROBE_FRESH);
}

} // namespace sockbuf::test
