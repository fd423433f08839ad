// SPDX-License-Identifier: MIT
// Network namespaces for scenarios: a fresh one per scenario (anonymous,
// so it disappears with the process even after a crash), and a user+network
// namespace for unprivileged runs.
#pragma once

#include <string>
#include <vector>

namespace sockbuf::contract
{

// Addresses of the suite, from the benchmarking range 198.18.0.0/15.
inline constexpr const char *server_addr = "198.18.10.1";
inline constexpr const char *client_addr = "198.18.10.2";

// Unprivileged start: become root of a new user namespace with a new
// network namespace.  0 or -errno.
int enter_user_netns();

// A new network namespace for the calling (single-threaded) process with
// lo up and the suite's addresses on it.  0 or -errno, with @what set.
int enter_fresh_netns(std::string *what);

// Reads/writes /proc/sys files.  0 or -errno.
int read_sysctl(const std::string &path, std::string *out);
int write_sysctl(const std::string &path, const std::string &value);
// The three numbers of tcp_rmem/tcp_wmem/tcp_mem; false when unreadable.
bool read_triple(const std::string &path, long out[3]);

// Runs a program (looked up in PATH, /usr/sbin, /sbin) and waits.
// Exit status, or -errno (-ENOENT when the program is nowhere).
int run_program(const std::vector<std::string> &argv, std::string *output);

} // namespace sockbuf::contract
