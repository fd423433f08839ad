// SPDX-License-Identifier: MIT
// The floor registry's reader and cleaner, for `sockbuf show`: the tables
// that processes publish (impl/internal/floor_registry.h: the file format
// and the library's signal-safe writer) read from outside.  Nothing in a
// file is trusted.
#pragma once

#include "floor_registry.h"

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace sockbuf::registry
{

struct entry {
	uint64_t inode = 0;
	int snd = 0, rcv = 0; // the larger where both publishers set one
	uint32_t who = 0;     // enum source bits
};

// What the process's floor guard says it keeps (file_header::guard_*).
struct guard_said {
	uint32_t mem_us = 0, set_us = 0; // set_us 0: no guard said (guard_at_once: at once)
	int served_by = 0;		 // the sockbufd it stood down for, 0: none
};

struct table {
	std::vector<entry> entries;
	guard_said guard;
	uint32_t dropped = 0;
	int publisher = 0;    // the header's publisher: 0, or the pid writing for the process
	uint32_t changes = 0; // the header's change count (file_header::changes)
};

// What the header alone says.
struct header_info {
	guard_said guard;
	int publisher = 0;
	uint32_t dropped = 0;
	uint32_t changes = 0;
};

// "/dev/shm/sockbuf-floors.PID.START".
std::string file_path(const std::string &dir, int pid, uint64_t start_time);

// Reads and checks the table at @path, which must belong to the process
// @pid started at @start_time and be owned by @uid with no group or other
// access.  0, or -errno with a reason in @why (-ENOENT: no table).
int read_file(const std::string &path, int pid, uint64_t start_time, uid_t uid, table *out,
	      std::string *why);

// The checks of read_file() on two copies of the file's bytes (@a and @b,
// file_size each, read one after the other: a slot counts only where both
// agree and no writer was inside it), for the process @pid started at
// @start_time; @what names the file in @why.  No system call: the part a
// fuzzer drives (tests/shim/fuzz_floor_table.cc).
int parse_images(const char *a, const char *b, int pid, uint64_t start_time,
		 const std::string &what, table *out, std::string *why);

// The header alone of the table of process @pid started at @start_time,
// with read_pid()'s rule for the file's owner and read_file()'s checks of
// the file and of the header: what a reader watching many tables compares
// (header_info::changes) before reading one again.  0 or -errno (-ESRCH:
// the process is gone).
int read_header(int pid, uint64_t start_time, header_info *out, std::string *why);

// The pid and start time a table's file name @name carries
// ("sockbuf-floors.PID.START", decimal without sign or leading zero);
// false for any other name.
bool parse_file_name(const char *name, int *pid, uint64_t *start_time);

// parse_images()'s checks of the header at @bytes (sizeof(file_header)
// of them).  No system call.
int parse_header(const char *bytes, int pid, uint64_t start_time, const std::string &what,
		 header_info *out, std::string *why);

// Reads and checks the table open at @fd (a regular file of the table's
// size, read twice, parse_images()) of process @pid started at
// @start_time; @what names it in @why.  0 or -errno.
int read_fd(int fd, int pid, uint64_t start_time, const std::string &what, table *out,
	    std::string *why);

// The live table of process @pid: its own (the memfd it holds, found in
// /proc/PID/fd: a process that exec()ed holds none), else the file a
// publisher keeps for it in /dev/shm (foreign_table: named for its pid
// and start time, owned by its user or root, and still mapped by the
// publisher the header names).
int read_pid(int pid, table *out, std::string *why);

// Removes files in @dir whose process is gone or whose start time does
// not match (only files owned by the caller, unless root).  Returns the
// number removed.
int clean_stale(const std::string &dir);

} // namespace sockbuf::registry
