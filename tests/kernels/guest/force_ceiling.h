// SPDX-License-Identifier: MIT
// force_ceiling.h - raw kernel facts behind a buffer size above the
// autotuning ceiling: is SO_*BUFFORCE past net.core.[wr]mem_max stored,
// does clearing the lock with SO_BUF_LOCK keep it, and which of the
// sysctls involved a network namespace owns.
#pragma once

#include <nlohmann/json.hpp>

namespace sockbuf::kcheck
{

// SO_SNDBUFFORCE/SO_RCVBUFFORCE of @size (library unit) on a fresh TCP
// socket, read back, then SO_BUF_LOCK 0 and read back again.
nlohmann::ordered_json force_raw(int size);

// In a child in a new network namespace: do net.core.wmem_max/rmem_max
// and net.ipv4.tcp_wmem exist there, and are they writable?  With
// @may_write, writes a different value in the child and reads the
// initial namespace's value after it: per-namespace when it did not move.
// (Where the file is shared, a write would change the global value: it is
// made only with @may_write, which the qemu guest passes.)
nlohmann::ordered_json netns_sysctls(bool may_write);

} // namespace sockbuf::kcheck
