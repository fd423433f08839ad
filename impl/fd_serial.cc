// SPDX-License-Identifier: MIT
// One call at a time on one fd across this process's threads.
#include "fd_serial.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdint>

namespace sockbuf::fd_serial
{

namespace
{

constexpr int stripes = 64;
// Owner thread (pthread_self) of each stripe, 0 when free.  Constant
// initialised: no load-time code.
std::atomic<uintptr_t> g_owner[stripes];

void free_all_in_child()
{
	for (auto &o : g_owner)
		o.store(0, std::memory_order_relaxed);
}

} // namespace

guard::guard(int fd) : stripe_(int(unsigned(fd) % stripes)), held_(false)
{
	const auto self = uintptr_t(pthread_self());
	auto &owner = g_owner[stripe_];
	if (owner.load(std::memory_order_relaxed) == self)
		return; // a signal handler on the thread that holds it
	for (int spins = 0;; spins++) {
		uintptr_t expected = 0;
		if (owner.compare_exchange_weak(expected, self, std::memory_order_acquire,
						std::memory_order_relaxed))
			break;
		// The holder is inside a few syscalls: spin briefly, then let
		// it run (it may share this core).
		if (spins >= 64)
			sched_yield();
	}
	held_ = true;
}

guard::~guard()
{
	if (held_)
		g_owner[stripe_].store(0, std::memory_order_release);
}

void install_fork_handler()
{
	pthread_atfork(nullptr, nullptr, free_all_in_child);
}

} // namespace sockbuf::fd_serial
