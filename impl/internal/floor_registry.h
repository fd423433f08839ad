// SPDX-License-Identifier: MIT
// The floor registry: a process with guarded (sockbuf_guard_add) or
// shimmed sockets publishes each socket's floors in a file of its own, so
// that `sockbuf show`, looking from outside, can tell which sockets are
// under their floor.
//
// The file is /dev/shm/sockbuf-floors.PID.START (START: the process's start
// time in clock ticks, field 22 of /proc/PID/stat, so that a reused pid is
// never misread), mode 0600, a header and fixed-size slots.  Writers use
// only system calls and atomics (no malloc, no lock): safe from a signal
// handler.  A forked child never writes into its parent's table (the
// mapping is not inherited, MADV_DONTFORK; the child makes its own file on
// its first write).  The file is removed at exit (not after _exit() or a
// fatal signal: readers ignore and clean such stale files).
//
// Publication is on unless the environment has SOCKBUF_FLOOR_REGISTRY=0
// (read once, at the first write).
//
// This is the format and the writer, in the library.  The reader and the
// cleaner of stale files are the command's (tools/cli/floor_read.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <sys/types.h>

namespace sockbuf::registry
{

// Who published a floor (bits, so that a reader can merge them).
enum source : uint32_t {
	by_guard = 1,
	by_shim = 2,
	// The shim (or the supervisor) for an accepted socket, with the floor
	// its listener had: the socket inherited the listener's sizes.
	by_listener = 4,
};
inline constexpr uint32_t known_sources = by_guard | by_shim | by_listener;

// The file's layout, version 1.  All fields native-endian.
inline constexpr char file_magic[8] = {'S', 'B', 'F', 'L', 'O', 'O', 'R', '1'};
inline constexpr uint32_t file_version = 1;
inline constexpr uint32_t slot_count = 8192;
inline constexpr const char *default_dir = "/dev/shm";
inline constexpr const char *file_prefix = "sockbuf-floors.";

struct file_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size; // sizeof(file_header)
	uint32_t slot_size;   // sizeof(file_slot)
	uint32_t nslots;
	int32_t pid;
	int32_t publisher;		 // 0: the process itself; else who writes for it
	uint64_t start_time;		 // clock ticks after boot, /proc/PID/stat field 22
	std::atomic<uint32_t> max_probe; // longest probe a slot was placed at
	std::atomic<uint32_t> dropped;	 // publications that found no free slot
	// Bumped after every slot written (release): a reader that watches
	// many tables (sockbufd) reads them again only when it moved.  Zero
	// in files of writers before 0.4, which never bump it.
	std::atomic<uint32_t> changes;
	// The process's floor guard, as it last said (publish_guard()), for
	// `sockbuf show`: how late at most it sees a cut by memory pressure
	// and one no event program sees, in microseconds (guard_set_us 0: no
	// guard said), and the sockbufd it stood down for (0: none).  Zero
	// in files of writers before 0.6.
	std::atomic<uint32_t> guard_mem_us;
	std::atomic<uint32_t> guard_set_us;
	std::atomic<int32_t> guard_served_by;
};
static_assert(sizeof(file_header) == 64);

// A seqlock per slot: odd seq while a writer changes it.
struct file_slot {
	std::atomic<uint32_t> seq;
	std::atomic<uint32_t> taken; // 1: claimed by a writer
	std::atomic<uint64_t> inode; // 0: empty
	std::atomic<uint32_t> who;   // enum source
	std::atomic<int32_t> snd;    // floor, kernel unit (0: none)
	std::atomic<int32_t> rcv;
	uint32_t reserved;
};
static_assert(sizeof(file_slot) == 32);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

inline constexpr size_t file_size = sizeof(file_header) + size_t(slot_count) * sizeof(file_slot);

// Writers (async-signal-safe).  publish() records or updates the floors of
// the socket with @inode for @who; both floors 0 withdraws.  0, or -errno
// (-ENOSPC: table full, counted in the header; -ECANCELED: publication
// off).  withdraw() forgets it; unknown inodes are fine.
int publish(uint64_t inode, int snd, int rcv, source who);
void withdraw(uint64_t inode, source who);
// Removes this process's file and ends publication (done at exit).
void close_own();
// What this process's floor guard keeps (file_header::guard_*), in its
// table if it has one: the last guard to say wins.  @set_us 0: no guard.
void publish_guard(uint32_t mem_us, uint32_t set_us, int served_by);

// A table that another process publishes for process @pid: `sockbuf run
// --via seccomp` and `sockbuf fix --guard` set floors on sockets they
// take from @pid with pidfd_getfd() and guard them from outside.  The
// file has the name and layout of @pid's own, with the header's
// publisher field naming this process, which alone maps it; readers take
// it as live while the publisher maps it.  Not async-signal-safe; one
// thread.  The file goes with the object.
class foreign_table
{
public:
	foreign_table() = default;
	~foreign_table();
	foreign_table(const foreign_table &) = delete;
	foreign_table &operator=(const foreign_table &) = delete;

	// Makes the file for @pid (as publish() would: not when publication
	// is off).  0 or -errno.
	int open(int pid);
	bool is_open() const { return h_ != nullptr; }
	// As publish() and withdraw(), in @pid's table.
	int publish(uint64_t inode, int snd, int rcv, source who);
	void withdraw(uint64_t inode, source who);
	// Handing the table to a forked copy: release() unmaps it and leaves
	// the file (the parent's part); reopen() maps the file again in the
	// child (the mapping is not inherited) and names the child its
	// publisher.  After either fails, the object holds no table.
	void release();
	int reopen();

private:
	file_header *h_ = nullptr;
	std::string path_;
};

// The start time of @pid (clock ticks), or 0 when unreadable.
// Async-signal-safe.
uint64_t process_start_time(int pid);

} // namespace sockbuf::registry
