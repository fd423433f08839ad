// SPDX-License-Identifier: MIT
// What the guard_events lab programs measure with: the process's CPU time
// and the median of a round's figures.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <vector>

namespace lab
{

// CPU seconds of the whole process so far (every thread, user and system).
inline double cpu_s(int who = RUSAGE_SELF)
{
	struct rusage ru;
	getrusage(who, &ru);
	return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The upper median (0 for none).
inline double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace lab
