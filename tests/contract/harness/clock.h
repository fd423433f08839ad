// SPDX-License-Identifier: MIT
#pragma once

#include <cerrno>
#include <cstdint>
#include <ctime>

namespace sockbuf::contract
{

inline int64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Pacing (not synchronisation): wait until an absolute monotonic time.
inline void sleep_until_ns(int64_t t)
{
	timespec ts = {time_t(t / 1000000000), long(t % 1000000000)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR)
		;
}

} // namespace sockbuf::contract

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

namespace sockbuf::contract
{

// Lets a short periodic observer (sampler, floor guard) run on time while
// transfers keep both cores busy: SCHED_FIFO where allowed (root), else a
// higher nice priority, else nothing.  Returns what it got.
inline const char *make_observer_thread()
{
	sched_param sp = {};
	sp.sched_priority = 10;
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
		return "SCHED_FIFO";
	if (setpriority(PRIO_PROCESS, 0, -10) == 0)
		return "nice -10";
	return "normal";
}

} // namespace sockbuf::contract
