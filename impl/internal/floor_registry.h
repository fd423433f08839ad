// SPDX-License-Identifier: MIT
// The floor registry: a process with guarded (sockbuf_guard_add) or
// shimmed sockets publishes each socket's floors in a table of its own, so
// that `sockbuf show`, looking from outside, can tell which sockets are
// under their floor, and sockbufd can keep them.
//
// A process's own table is a memfd named "sockbuf-floors" (memfd_create,
// close-on-exec), its whole size allocated before it is mapped
// (fallocate: a full memory cgroup is an error, never a SIGBUS) and sealed
// against shrinking and growing; its descriptor stays open in the process.
// It has no name in any directory: it goes with the process (exit, a
// signal, an exec), and only those who may look into the process's
// descriptor table (/proc/PID/fd, the ptrace rule: its user, with at least
// its capabilities) can open it.  `sockbuf show` reads it there.
//
// The table is handed to sockbufd over a unix stream socket in the
// daemon's run directory (register_socket, registration_message): the
// process sends a read-only descriptor of it (SCM_RIGHTS) and the number
// of its own descriptor; the daemon takes the peer's identity from the
// kernel (SO_PEERCRED, SO_PEERPIDFD) and checks that this process holds
// the table at that number.  At the table's creation, at the first
// publication after a daemon (re)started, and from a guard's hand-over
// check.
//
// The layout: a header and fixed-size slots.  Writers use only system
// calls and atomics (no malloc, no lock): safe from a signal handler.  A
// forked child never writes into its parent's table (the mapping is not
// inherited, MADV_DONTFORK; the child makes its own on its first write).
//
// Publication is on unless the environment has SOCKBUF_FLOOR_REGISTRY=0
// (read once, at the first write).
//
// A table that another process publishes for a process (foreign_table:
// the supervisor, `sockbuf fix --guard`) is a file in /dev/shm named
// "sockbuf-floors.PID.START" (START: the process's start time in clock
// ticks, field 22 of /proc/PID/stat), mode 0600, allocated before it is
// mapped, removed with its object.
//
// This is the format and the writer, in the library.  The reader is the
// tools' (tools/remote/floor_read.h).
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
// A process's own table: the memfd's name, and its descriptor's link in
// /proc/PID/fd ("/memfd:sockbuf-floors (deleted)").
inline constexpr const char *memfd_name = "sockbuf-floors";
inline constexpr const char *memfd_link = "/memfd:sockbuf-floors ";
// The daemon's registration socket, in its run directory
// (impl/internal/daemon_presence.h).
inline constexpr const char *register_socket = "register";

// What a process sends with its table's descriptor (SCM_RIGHTS); the
// daemon answers one int32_t: 0 (served), or -errno.
inline constexpr char register_magic[8] = {'S', 'B', 'R', 'E', 'G', '1', 0, 0};
enum register_kind : int32_t {
	kind_own = 0,	  // the sender's own table (header pid: the sender)
	kind_foreign = 1, // a table the sender publishes for process @target
};
struct registration_message {
	char magic[8];
	int32_t kind;	// enum register_kind
	int32_t fd;	// the table's descriptor number in the sender
	int32_t target; // kind_foreign: the pid the table is for
	uint32_t reserved;
};
static_assert(sizeof(registration_message) == 24);

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
	// and one by a socket-option write, in microseconds (guard_set_us 0:
	// no guard said; guard_at_once: its event programs see the writes),
	// and the sockbufd it stood down for (0: none).  Zero in files of
	// writers before 0.6.
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
// Ends publication (done at exit).  The table goes with the process.
void close_own();
// file_header::guard_set_us of a guard whose event programs see
// socket-option writes (0 there means no guard said).
inline constexpr uint32_t guard_at_once = UINT32_MAX;
// What this process's floor guard keeps (file_header::guard_*), in its
// table if it has one: the last guard to say wins.  @set_us 0: at once
// (stored as guard_at_once).  publish_no_guard(): no guard runs.
void publish_guard(uint32_t mem_us, uint32_t set_us, int served_by);
void publish_no_guard();

// This process's own table: its descriptor, or -1 when it has none (yet).
int own_table_fd();

// Hands this process's own table to the daemon whose run directory is
// @dir (root's, writable by no one else; else -EPERM): 0 when it answered
// that it serves it, its -errno, -ETIMEDOUT after @wait_ms without an
// answer, or -errno of the connection (-ENOENT, -ECONNREFUSED: no
// daemon).  @wait_ms 0: sent, not waited for (0 once sent).
// Async-signal-safe with @wait_ms 0.
int register_own(const char *dir, int wait_ms);

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
	// is off), its space allocated first (-ENOSPC: /dev/shm is full), and
	// offers it to a running daemon.  0 or -errno.
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
	void offer_foreign();

	file_header *h_ = nullptr;
	int fd_ = -1; // held: the daemon checks the publisher has it
	std::string path_;
};

// The start time of @pid (clock ticks), or 0 when unreadable.
// Async-signal-safe.
uint64_t process_start_time(int pid);

} // namespace sockbuf::registry
