// SPDX-License-Identifier: MIT
// Reading the net sysctls that bound buffer sizes.
#pragma once

namespace sockbuf::sysctl
{

// Reads up to n integers from a /proc/sys file.  Returns how many were
// read (0 when the file cannot be read); unread slots are set to -1.
int read_ints(const char *path, int *out, int n);

// One integer, or -1.
int read_int(const char *path);

// The largest sk_sndbuf/sk_rcvbuf that SO_SNDBUF/SO_RCVBUF can store, from
// net.core.[wr]mem_max (-1 stays -1): sk_setsockopt() clamps the value to
// the sysctl and to INT_MAX / 2, then doubles it.
int setbuf_stored_max(int mem_max_sysctl);

} // namespace sockbuf::sysctl
