// SPDX-License-Identifier: MIT
// memcg.h - a cgroup v2 memory group made for one run: create it, move a
// process in, set memory.max, read what the group was charged.
#pragma once

#include <map>
#include <string>
#include <sys/types.h>

namespace sockbuf::kcheck
{

// Whether groups made under @parent get the memory controller ("memory"
// in its cgroup.subtree_control).
bool memcg_controls_memory(const std::string &parent);
// mkdir; a group left over from an earlier run is removed first.  -errno.
int memcg_create(const std::string &dir);
// rmdir; -errno (EBUSY while a process is still in it).
int memcg_remove(const std::string &dir);
int memcg_add_pid(const std::string &dir, pid_t pid);
// memory.max; @bytes < 0 writes "max" (no limit).  -errno.
int memcg_set_max(const std::string &dir, long long bytes);
// A one-number file such as memory.current or memory.max ("max" reads as
// -2); -1 when it cannot be read.
long long memcg_value(const std::string &dir, const char *file);
// "key value" lines such as memory.stat or memory.events; empty when the
// file cannot be read.
std::map<std::string, long long> memcg_keyed(const std::string &dir, const char *file);
// One key of memory.stat (e.g. "sock", bytes); -1 when absent.
long long memcg_stat(const std::string &dir, const char *key);

} // namespace sockbuf::kcheck
