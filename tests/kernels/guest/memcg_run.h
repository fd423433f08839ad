// SPDX-License-Identifier: MIT
// memcg_run.h - one bulk transfer whose SENDER alone runs in a small cgroup
// v2 memory group, squeezed in the middle of the transfer.
//
// The sender is a forked process that joins the group before it makes its
// socket: the kernel charges a socket's memory to the group of the process
// that created it, at creation.  The checker (receiver, sampler, the
// squeeze itself) stays in the root group, so the group's limit can only
// stop the sender, never the program that reports what happened.  The
// sender passes its socket to the checker (SCM_RIGHTS), which samples it.
#pragma once

#include "transfer.h"

#include <map>
#include <string>

namespace sockbuf::kcheck
{

// How the sender's socket is set up before connect().
enum class memcg_arm {
	raw,	 // SO_SNDBUF/SO_RCVBUF, then SO_BUF_LOCK 0: the kernel alone
	initial, // sockbuf_set_initial_bufsize, nothing watching the floor
	reserve, // the same with SOCKBUF_F_RESERVE_MEM (SO_RESERVE_MEM)
	lock,	 // sockbuf_lock_bufsize: autotuning off, for contrast
	guard,	 // initial, with the library's floor guard (sockbuf_guard_*) on a
		 // 10 ms thread in the sender, watching its socket
};

bool memcg_arm_from_name(const std::string &name, memcg_arm &out);
const char *memcg_arm_name(memcg_arm arm);

struct memcg_params {
	transfer_params base; // namespaces, address, port, size, bytes, time
	memcg_arm arm = memcg_arm::raw;
	std::string cgroup_parent = "/sys/fs/cgroup"; // memory in its subtree_control
	// memory.max during the squeeze: the group's memory that is not
	// socket memory, plus this much for sockets beyond any reservation.
	long long headroom = 64 << 10;
};

// The sender's setup as the sender process saw it.
struct memcg_sender_setup {
	unsigned probe_features = 0, probe_known = 0; // probed inside the group
	int oom_adj_err = 0, mlock_err = 0;
	int unlock_err = 0; // raw arm: SO_BUF_LOCK 0
	int reserve_err = 0;
	bool reserved = false; // SOCKBUF_R_RESERVED
};

struct memcg_squeeze {
	long from_ms = 0, until_ms = 0; // planned
	long applied_at_ms = -1, released_at_ms = -1;
	long write_ms = 0; // how long the memory.max writes took
	long long current_at_apply = -1, sock_at_apply = -1;
	long long max_applied = -1; // the last value written
	int write_err = 0;
};

struct memcg_result {
	int err = 0; // -errno when the transfer could not be set up
	std::string what;
	std::string group;
	memcg_sender_setup setup;
	memcg_squeeze squeeze;
	long long sent = 0, received = 0;
	long long corrupt_at = -1; // stream offset of the first wrong byte
	int send_err = 0;	   // -errno that ended the sender's loop early
	// Guard arm: what the sender's floor guard did (-1 other arms).
	long long guard_passes = -1, guard_below = -1, guard_restored = -1;
	// The guard's longest pass: a pass that waits on the socket (a
	// restore needs its lock) is part of the mode's bound.
	long long guard_max_pass_us = -1;
	int guard_err = 0;	 // -errno of a guard call that failed
	std::string sender_exit; // "exit 0", "signal 9", ...
	double seconds = 0;
	socket_track sender, receiver;
	// getsockopt(SO_RESERVE_MEM) on the sender over the transfer; -1 when
	// the kernel does not answer it.
	int reserved_min = -1, reserved_max = -1;
	long reserved_zero_samples = 0;
	long long sock_peak = -1, sock_end = -1; // memory.stat sock, bytes
	std::map<std::string, long long> events; // memory.events at the end
};

memcg_result run_memcg_transfer(const memcg_params &p);

} // namespace sockbuf::kcheck
