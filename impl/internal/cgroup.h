// SPDX-License-Identifier: MIT
// Why SO_RESERVE_MEM is or is not usable: the process's memory cgroup, read
// from /proc/self/cgroup, /proc/self/mountinfo, /proc/cmdline and the
// cgroup's own files.  The probe's SO_RESERVE_MEM call is the truth; this
// only names the reason (enum sockbuf_reserve_state).
//
// The parsers take text, so tests feed them fixtures; read_system() feeds
// them the real files.  Nothing allocates: the probe runs at the shim's load
// time inside arbitrary programs.
#pragma once

#include <cstddef>
#include <string_view>

namespace sockbuf::cgroup
{

inline constexpr size_t max_path = 512;

// Where the process sits (/proc/self/cgroup).  A path that does not fit is
// left empty and its flag false, as if the line were absent.
struct membership {
	bool v1_memory = false; // a v1 hierarchy carries the memory controller
	char v1_path[max_path] = {};
	bool v2 = false; // the "0::" line of the unified hierarchy
	char v2_path[max_path] = {};
};

// Mount points (/proc/self/mountinfo); empty when not mounted.
struct mounts {
	char v1_memory[max_path] = {};	    // mount point of the v1 memory hierarchy
	char v1_memory_root[max_path] = {}; // the cgroup it shows as its root
	char v2[max_path] = {};		    // mount point of cgroup2
};

struct facts {
	membership member;
	mounts mnt;
	bool nosocket = false; // cgroup.memory=nosocket on the kernel command line
	int v2_memory = -1;    // "memory" in the v2 cgroup's cgroup.controllers: 1, 0, -1 unknown
};

void parse_proc_cgroup(std::string_view text, membership *out);
void parse_mountinfo(std::string_view text, mounts *out);
// cgroup.memory=nosocket, also as one of a comma list (nokmem,nosocket).
bool cmdline_nosocket(std::string_view cmdline);
// Whether a cgroup.controllers (space-separated) names "memory".
bool controllers_have_memory(std::string_view text);

// The enum sockbuf_reserve_state for the result @reserve_ret (0 or -errno)
// of SO_RESERVE_MEM on a fresh TCP socket of this process.
int explain(int reserve_ret, const facts &f);

// Fills @out from the running system; what cannot be read stays unknown.
void read_system(facts *out);

// The directory of the process's memory cgroup under its mount point
// (v1 memory hierarchy if the process has one, else cgroup2), written to
// @buf; false when it is not known.
bool memory_cgroup_dir(const facts &f, char *buf, size_t len);

} // namespace sockbuf::cgroup
