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

} // namespace sockbuf::sysctl
