// SPDX-License-Identifier: MIT
// `sockbuf show`: gather a process's TCP sockets as the kernel sees them.
// Sizes, memory, RTT and window scales come from one inet_diag dump
// (impl/diag); the lock bits, which inet_diag does not carry, from a
// pidfd_getfd() duplicate of each socket.
#pragma once

#include "diag.h"

#include <string>
#include <vector>

namespace sockbuf::cli::show
{

// The network namespace's buffer sysctls (-1 where unreadable).
struct net_limits {
	int rcvbuf_max = -1, sndbuf_max = -1; // stored unit: 2 x net.core.[rw]mem_max
	int tcp_rmem[3] = {-1, -1, -1};
	int tcp_wmem[3] = {-1, -1, -1};
};

struct shown_socket {
	int pid = 0;
	int fd = -1;
	diag::socket_info info;
	int lock = -1;	       // SOCKBUF_SND/SOCKBUF_RCV bits, -1 unknown
	std::string lock_note; // why the lock is unknown
	// The floors the process published (impl/internal/floor_registry.h), 0: none.
	int floor_snd = 0, floor_rcv = 0;
	uint32_t floor_by = 0; // registry::source bits
	// A socket systemd passed to the process (socket activation): its
	// socket unit, and what that unit's file sets on it (show_check.h).
	std::string systemd_unit, systemd_note;
	// What the process's floor guard said it keeps (its table's header):
	// how late at most it sees a cut by memory pressure and one by
	// setsockopt, in microseconds (guard_set_us 0: no guard said;
	// registry::guard_at_once: its event programs see the writes), and
	// the sockbufd it stood down for (0: none).
	uint32_t guard_mem_us = 0, guard_set_us = 0;
	int guard_served_by = 0;
};

struct collection {
	net_limits limits;
	std::vector<shown_socket> sockets;
	std::vector<std::string> notes; // things the reader should know
};

// Every TCP socket of @pid, with the floors it published.  Enters @pid's network namespace when it
// is not ours (needs CAP_SYS_ADMIN).  0 or -errno, with a reason in @why.
int collect_pid(int pid, collection *out, std::string *why);

// Every TCP socket in this network namespace that some process holds.
int collect_all(collection *out, std::string *why);

net_limits read_limits();

} // namespace sockbuf::cli::show
