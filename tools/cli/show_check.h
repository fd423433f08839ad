// SPDX-License-Identifier: MIT
// `sockbuf show`: what a host check reports (--check), and which sockets
// systemd passed to a process (socket activation), named with their
// socket unit, whose ReceiveBuffer=/SendBuffer= lock them.
#pragma once

#include "show_collect.h"

#include <map>
#include <string>
#include <vector>

namespace sockbuf::cli::show
{

// What a process's initial environment and cgroup say about the sockets
// systemd passed it: LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES (read from
// /proc/PID/environ, the environment the program was started with, which
// sd_listen_fds(unset=1) does not erase) and the service unit in
// /proc/PID/cgroup.  fd 3 .. 3 + LISTEN_FDS - 1 -> the socket unit (the
// fd's name, which is the socket unit's unless FileDescriptorName= says
// otherwise; else "SERVICE's socket unit").  Empty when the process was
// not started by systemd with sockets, or LISTEN_PID names another
// process than @pid or its parent (a forked worker holds the master's
// fds at the same numbers).
struct systemd_passed {
	std::string service;		    // "nginx.service", "" unknown
	std::map<int, std::string> fd_unit; // fd -> socket unit
};
systemd_passed read_systemd_passed(int pid);

// The parsing, separate for tests: @environ is NUL-separated, @cgroup
// the text of /proc/PID/cgroup.
systemd_passed parse_systemd_passed(int pid, int ppid, const std::string &environ,
				    const std::string &cgroup);

// ReceiveBuffer= and SendBuffer= lines of socket unit @unit, from its
// file and drop-ins in systemd's unit directories ("" none found).
std::string unit_buffer_settings(const std::string &unit);

// Fills systemd_unit and systemd_note of every socket in @c that systemd
// passed to its process.
void name_systemd_units(collection *c);

// --check: one line per socket locked or below its floor, on standard
// output.  true when any was.
bool print_check(const collection &c);

} // namespace sockbuf::cli::show
