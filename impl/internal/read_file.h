// SPDX-License-Identifier: MIT
// Reading a whole (small) file: /proc and /sys files, the shim's
// configuration, tracefs.  A signal can interrupt read(2) with EINTR
// before any byte arrives; these retry it (a bounded number of times in a
// row, so that a caller never spins) instead of taking it for an error or
// for the end of the file.  Every read goes through the syscall seam
// (sys.h), where tests inject EINTR.
#pragma once

#include <cstddef>
#include <string>
#include <sys/types.h>

namespace sockbuf::fileio
{

// EINTRs in a row after which a read gives up with -EINTR.
inline constexpr int eintr_retries = 64;

// Async-signal-safe (read(2), open(2) and close(2) only, no allocation).
// Reads @fd from its offset until the end of the file or @cap bytes.
// Returns the count (@cap: the file may hold more) or -errno.
ssize_t read_all(int fd, char *buf, size_t cap);
// The same for the file at @path, opened O_RDONLY | O_CLOEXEC.
ssize_t read_file(const char *path, char *buf, size_t cap);

// Not async-signal-safe (allocates): the file at @path, at most @cap
// bytes, into @out.  0 or -errno (@out then holds what was read).
int read_file(const char *path, std::string *out, size_t cap = size_t(16) << 20);

} // namespace sockbuf::fileio
