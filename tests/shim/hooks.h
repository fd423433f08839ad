// SPDX-License-Identifier: MIT
// Counters for heap allocations and mutex locks made while a test watches:
// the test program replaces malloc and friends and pthread_mutex_lock
// (exported, so the preloaded shim binds to them) and forwards to glibc.
#pragma once

#include <atomic>

namespace shim_test
{

extern std::atomic<bool> watching;    // count in any thread
extern std::atomic<long> allocations; // malloc, calloc, realloc, memalign ...
extern std::atomic<long> mutex_locks; // pthread_mutex_lock

} // namespace shim_test
