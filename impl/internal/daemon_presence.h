// SPDX-License-Identifier: MIT
// Whether sockbufd serves a process's floors.  The daemon says so in a
// file while it runs, "PID START NETNS SHMDEV SHMINO\n" (its pid, its
// start time in clock ticks, the inode of its network namespace, the
// device and inode of its /dev/shm: a field kept for readers of earlier
// versions), renamed into place in its run directory; it serves the
// processes of that namespace that hand it their floor table over the
// socket "register" beside the file (impl/internal/floor_registry.h).
//
// Two kinds of reader: `sockbuf show` (served_by of each socket), and a
// floor guard, which hands its sockets over to the daemon and takes them
// back when the daemon goes (impl/guard_drivers.cc).  The guard trusts the
// file only when root wrote it: the file and its directory owned by uid 0
// and writable by no one else (anyone who may write the directory may put
// a file there), neither a symbolic link, the file a regular one.  The
// directory is opened once and checked through its descriptor, and the
// file opened in that descriptor (openat): never by the path again, which
// anyone able to swap one of its components between the check and the
// open (for a link to a directory of their own) could point elsewhere.
//
// The directory is /run/sockbufd (the unit's RuntimeDirectory), or
// $SOCKBUF_DAEMON_DIR when set (read with secure_getenv: a set-id program
// ignores it): tests and a second daemon use their own.
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace sockbuf::presence
{

inline constexpr const char *default_dir = "/run/sockbufd";
inline constexpr const char *file_name = "serving";

// The run directory and the file in it.
std::string dir();
std::string file();

// What the file says.
struct serving {
	pid_t pid = 0;
	uint64_t start = 0; // /proc/PID/stat field 22
	uint64_t netns = 0;
	uint64_t shm_dev = 0, shm_ino = 0; // its /dev/shm
};

// The file's one line for @s, "PID START NETNS SHMDEV SHMINO\n": what
// announce() writes.
std::string line_of(const serving &s);

// Parses @text, the whole file, into @out: 0, or -EINVAL when it is not
// one such line (with a pid, a start time and a namespace).  What
// read_serving() applies to the file.
int parse_line(const char *text, serving *out);

// Written by the daemon at start, through a file renamed into place (the
// directory made 0755, less the umask, if missing); the file is 0644
// whatever the umask.  The directory is checked as readers check it, with
// this process's user in root's place (its own, writable by no one else,
// not a link: else -EPERM and nothing is written) and held as they hold
// it: the file is written and renamed in the directory checked, never in
// one swapped in for it.  0 or -errno.
int announce();
// Removed at a clean exit, if it is still this process's (a killed
// daemon's file names a dead process, or one started later: readers
// check the start time); from the directory it was read in.
void withdraw();

// Reads and checks the file: 0, -ENOENT (no file, or no directory),
// -EPERM (the directory or the file not root's, or writable by group or
// others, or a symbolic link; the directory not a directory, the file not
// a regular file), -EINVAL (not in the format), or another -errno.
int read_serving(serving *out);

// The inode of the network namespace of the process whose /proc
// directory is @proc ("/proc/self", "/proc/PID"), or 0.
uint64_t netns_of(const std::string &proc);

// Whether a live sockbufd serves the network namespace process @pid is
// in.  For a report: nothing is held.
bool serves(pid_t pid);

// For a guard that hands over: a pidfd (O_CLOEXEC) of the live daemon
// that serves this process's network namespace, readable when it exits,
// once the daemon has answered that it serves this process's floor table
// (registry::register_own, waited for at most 200 ms); or -ENOENT (no
// daemon, or the one named has gone), -EPERM (the file is not root's),
// -EXDEV (it serves another namespace), -EACCES (it could not take this
// process's sockets or read its table: the process is not dumpable, or
// Yama's ptrace_scope is 3), -ETIMEDOUT (no answer), the daemon's own
// refusal, -EINVAL, -ENOSYS (no pidfd_open: before 5.3), or another
// -errno.  The start time is checked after the pidfd is open, so the
// pidfd names the daemon the file names, not a process that took its
// number.  @out: what the file said.  The one place a guard decides
// whether a daemon serves it.
int serving_pidfd(serving *out);

// The run directory held (O_PATH, O_CLOEXEC) if it is a directory, not a
// symbolic link, owned by @owner and writable by no one else: for other
// files of the daemon's there (daemon_progress.h), opened relative to
// it.  A descriptor, or -EPERM, -ENOENT, -errno.
int open_run_dir(uid_t owner);

} // namespace sockbuf::presence
