// SPDX-License-Identifier: MIT
// Host-wide knobs (net.ipv4.tcp_mem), only for runs allowed to change
// global state (inside a qemu guest).  tcp_mem lives in the initial network
// namespace only, so its file is opened before any scenario namespace.
#pragma once

#include <string>

namespace sockbuf::contract
{

// Opens /proc/sys/net/ipv4/tcp_mem for writing.  0 or -errno.
int open_global_knobs();
// -1 when not opened.
int tcp_mem_fd();
int write_tcp_mem(const std::string &value);
std::string read_tcp_mem();
// Pages of TCP memory in use (/proc/net/sockstat "TCP: ... mem N"), or -1.
long tcp_mem_in_use();

} // namespace sockbuf::contract
