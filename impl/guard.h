// SPDX-License-Identifier: MIT
// The floor guard behind sockbuf_guard_*(): a set of sockets with their
// floors, a pass that finds and restores those below, and the two ways to
// drive passes (a thread, or a timerfd in the caller's loop).  Guards are
// named by ids through a small table (api_guard.cc), so that a destroyed
// guard's id gives -EBADF instead of a dangling pointer.  The class is
// defined in files of one job each: guard.cc (the set, add, remove,
// totals), guard_source.cc (which size source a pass uses, the identity
// sweep), one file per size source (guard_source_dump.cc, _ring.cc,
// _bpf.cc, _getsockopt.cc), guard_pass.cc (check and restore),
// guard_round.cc (the event source's rounds) and guard_drivers.cc
// (thread, timerfd, fork).
//
// What a pass reads: one SO_MEMINFO per socket when both directions are
// floored (SO_SNDBUF or SO_RCVBUF when one is; both where the kernel has
// no SO_MEMINFO), and nothing more.  A closed fd fails its read (EBADF)
// and leaves at once.  Whatever source found a socket below its floor,
// the restore first checks that the fd still names the socket added (its
// SO_COOKIE, or its inode by fstat where the kernel gave no cookie), then
// writes: a number that now names another socket leaves the guard
// unwritten, counted as reused.  The check and the writes go through a
// descriptor of the guard's own (a duplicate taken before the check and
// closed after the writes), so the program re-pointing the number in
// between cannot redirect them.  A number reused for a socket that is not
// below the old floor reads fine: a rolling sweep checks the identity of
// ceil(n / 16) sockets per pass, so such an entry leaves within
// 2 * sweep_passes passes of the reuse.  With SOCKBUF_GUARD_BPF a pass is
// one BPF iterator over the process's files (bpf_pass.h) that checks every
// identity in the same walk.
//
// Locks: pass_mu_ makes passes one at a time and owns everything only a
// pass uses (sources, rings, the sweep); mu_ guards the set and the
// totals and is held only briefly: by add() and remove(), at the start
// and end of a pass, and around each single restore (its identity check
// and writes), so add() and remove() wait for one restore at most, never
// for a whole pass, and once remove() has returned no pass writes through
// the entry removed.  A fork() in another thread waits for mu_, not for
// a pass: the child resets what a pass in flight could have left
// half-done (after_fork_child()).
#pragma once

#include "bpf_pass.h"
#include "buffer.h"
#include "daemon_progress.h"
#include "diag.h"
#include "guard_entries.h"
#include "guard_events.h"
#include "uring.h"

#include <sockbuf/sockbuf.h>

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sockbuf::guard
{

// The identity sweep's round: every socket registered when a round began
// has had its identity checked when it ends, at most this many passes later.
inline constexpr size_t sweep_passes = 16;

// 0, or -EINVAL for bits outside SOCKBUF_GUARD_*.
int check_flags(unsigned int flags);

#ifdef SOCKBUF_TEST_SEAM
// Makes every guard's passes use one size source (SOCKBUF_GUARD_SRC_*)
// where it is available, falling back as usual where it is not; -1 gives
// the normal choice back.
void force_source(int source);
// As if guard @id's ring buffer had had no room for @n records
// (api_guard.cc).  0 or -EBADF.
int lose_records_for_test(int id, uint64_t n);
// The next @n clears of a pending mark in guard @id's event map fail
// (-ENOMEM), as an update of the map that cannot allocate.  0 or -EBADF.
int fail_clears_for_test(int id, int n);
#endif

class floor_guard
{
public:
	explicit floor_guard(unsigned int flags);
	~floor_guard(); // stops the thread, closes the timer
	floor_guard(const floor_guard &) = delete;
	floor_guard &operator=(const floor_guard &) = delete;

	// @expect_inode: when not 0, the socket read must be this one
	// (-ESTALE otherwise): a connection found by a listener watch.
	// @read_fd: when >= 0, a duplicate of @fd that the socket's checks,
	// identity and reservation go through (the entry keeps @fd).
	int add(int fd, const struct sockbuf_floor &floor, uint32_t expect_inode = 0,
		int read_fd = -1);
	int add_listener(int fd, const struct sockbuf_floor &floor);
	int remove(int fd);
	int pass(struct sockbuf_guard_report *out);
	int start(unsigned int interval_us);
	int stop();
	int timerfd(unsigned int interval_us);
	void stats(struct sockbuf_guard_totals *out);
	void event_stats(struct sockbuf_guard_event_totals *out);
	void daemon_stats(struct sockbuf_guard_daemon_totals *out);
	int set_net_interval(unsigned int interval_us);
#ifdef SOCKBUF_TEST_SEAM
	// As if the ring buffer had had no room for @n records.
	void lose_records_for_test(uint64_t n);
	void fail_clears_for_test(int n);
#endif

	// pthread_atfork, for every guard (api_guard.cc): before fork() the
	// set's locks are taken (briefly held by anyone), after it they are
	// released in the parent; in the child they are released and every
	// per-process thing is reset: the pass lock (a pass may have been in
	// flight in a thread the child lacks), the thread, the rings, the
	// BPF iterator, the netlink socket, the timer (the parent's).
	void before_fork();
	void after_fork_parent();
	void after_fork_child();

private:
	struct sizes {
		int64_t snd = -1, rcv = -1; // -1: not read by the pass's source
		bool verified = false;	    // this pass saw the fd name the socket
	};
	// One socket's io_uring reads.
	struct ring_vals {
		uint64_t cookie;
		uint32_t mem[buffer::meminfo_len / sizeof(uint32_t)];
		int snd, rcv;
		bool asked, cookie_read, meminfo_read;
	};
	enum verdict : char { keep, gone, reused };

	int choose_source(size_t n) const;
	bool both_in_one_read(const entry &e) const;
	void plan_sweep(size_t n);
	bool in_sweep(size_t i) const;
	verdict identity(const entry &e) const
	{
		return identity_on(e.fd, e);
	}
	verdict identity_on(int fd, const entry &e) const;
	// The size sources, one file each.  A source reads the first @n
	// entries under pass_mu_: it fills now_[i] for each entry it read
	// and may set verdict_[i] (gone, reused) for one it found closed or
	// re-pointed; an entry it leaves unread is read with read_sizes_one()
	// by the pass.  A source that fails records why in its *_err_ (dump,
	// ring, bpf) and is not chosen again; the pass goes on without it.
	void read_sizes_from_dump(size_t n);
	bool read_sizes_from_ring(pid_t self, size_t n); // false: no ring, use getsockopt
	bool read_sizes_from_bpf(pid_t self, size_t n);	 // false: no iterator, choose again
	bool bpf_wanted() const;
	void bpf_claim(size_t n);
	void bpf_release(const entry &e);
	bool read_sizes_one(const entry &e, sizes *out); // false: socket gone
	bool check_one(size_t i, struct sockbuf_guard_report *p);
	void restore_one(int pin, const entry &e, const sizes &now, struct sockbuf_guard_report *p);
	void compact(size_t n, struct sockbuf_guard_report *p);
	void count(const struct sockbuf_guard_report &p); // into stats_; caller holds mu_
	void erase(size_t i);
	void index_add(size_t i);
	void index_drop(size_t i);
	void drive(unsigned int net_us, unsigned int poll_us, bool events);
	void run_thread(unsigned int interval_us, bool events);
	int wait_served(int pidfd, int64_t until_ns);
	static void name_thread(); // "sockbuf-guard", as top -H and ps -L show it
	void run_thread_events(unsigned int net_us, unsigned int poll_us);
	// With events and a timerfd: re-arms the timer to fire after the
	// polling interval while a mark could not be cleared.  Caller holds
	// pass_mu_.
	void rearm_for_unclear();
	int run_pass(bool full, struct sockbuf_guard_report *out);  // caller holds pass_mu_
	void full_pass(pid_t self, struct sockbuf_guard_report *p); // caller holds pass_mu_
	bool events_round(struct sockbuf_guard_report *p);	    // true: records were lost
	bool clear_mark(uint32_t ino, const entry &e); // false: keep it for a full pass
	bool events_on() const
	{
		return ev_err_ == 0 && ev_.is_open();
	}
	void reserve_at_add(int fd, const struct sockbuf_floor &floor);
	// The hand-over to sockbufd (guard_handover.cc).  Caller holds
	// pass_mu_.  handover_step(): at the start of every pass, looks for a
	// daemon (at most every handover_check_ns) or, while one serves,
	// whether it is still there; true when this pass is to be skipped
	// (served, no safety-net pass due).
	bool handover_step(int64_t now);
	bool handover_wanted() const;
	// 0 while the daemon behind progress_fd_ makes progress and keeps
	// every kind of cut within this guard's own bound; else why not
	// (-ETIMEDOUT, -ERANGE, -EAGAIN, or the -errno of reading its file).
	int daemon_keeps(int64_t now);
	// What this guard keeps by itself: how late at most it sees a cut by
	// memory pressure (0: its event programs see them) and one no event
	// program sees (setsockopt, SO_BUF_LOCK), in microseconds.
	progress::bounds own_bounds() const;
	void close_progress();
	void stand_down(int pidfd, pid_t daemon, int64_t now);
	void resume(int why);
	void reload_events();	  // after the pass that follows resume()
	void wake_for_handover(); // caller holds mu_
	bool events_on_locked()
	{
		std::lock_guard<std::mutex> lock(pass_mu_);
		return events_on();
	}
	void drain_timer(); // a skipped pass still reads the caller's timer
	int served_wait_fd() const
	{
		return served_fd_.load(std::memory_order_acquire);
	}
	void count_reservation(const struct sockbuf_report &rep);
	struct listener_watch {
		int fd;
		uint32_t inode;
		uint64_t cookie;
		int family;
		uint16_t port;	  // host order
		bool any_addr;	  // bound to the wildcard address
		uint8_t addr[16]; // otherwise this one (network order)
		struct sockbuf_floor floor;
	};
	// Listener watches (guard_listeners.cc).  adopt_accepted() runs at
	// the start of every full pass, under pass_mu_: it ends the watches
	// whose listener is gone and adds the connections found.  Returns
	// how many it added.
	int adopt_accepted();
	// Ends the watch of the listener @inode; false if there is none.
	// Caller holds mu_.
	bool end_watch(uint32_t inode);
	// 0, or -ERANGE for a floor above what the kernel stores without
	// FORCE when this guard may not force, or the probe's -errno.
	int check_range(const struct sockbuf_floor &floor) const;
	int adopt_walk(const std::vector<listener_watch> &watches); // without inet_diag

	const unsigned int flags_;
	const pid_t owner_;

	std::mutex pass_mu_;		   // one pass at a time, and everything a pass owns:
	std::vector<sizes> now_;	   // per entry, filled by a pass
	std::vector<char> verdict_;	   // per entry (enum verdict)
	std::vector<ring_vals> ring_vals_; // per entry, io_uring passes
	std::vector<uring::sockopt_read> ring_reads_;
	diag::session diag_;
	int diag_err_ = 0;
	bool diag_reopen_ = false; // a forked child: open its own netlink socket
	uring::sockopt_ring ring_; // made on the first pass that wants it
	int uring_err_ = 0;
	bool meminfo_ok_ = true; // false once SO_MEMINFO gave ENOPROTOOPT (before 4.12)
	bpf::pass_iter bpf_;	 // loaded on the first pass that wants it
	int bpf_err_ = 0;	 // why passes do not use it (0: they may)
	// Per fd number: the seq of the entry whose inode its slot holds.
	std::vector<uint64_t> bpf_seq_;
	uint64_t bpf_claimed_seq_ = 0; // entries up to this seq have claimed slots
	int max_fd_seen_ = -1;	       // max_fd_ when the pass began
	// The identity sweep: this pass checks entries [sweep_lo_, sweep_hi_),
	// a window of ceil(n / sweep_passes) that moves on each pass and
	// wraps.  An entry moved down by compaction may wait one more round.
	size_t sweep_lo_ = 0, sweep_hi_ = 0;
	// The last pass's CPU time by size source (SOCKBUF_GUARD_SRC_*), 0
	// until measured.  io_uring and getsockopt cost per socket; a dump's
	// cost is mostly the kernel's walk of its whole established-socket
	// hash table, whatever the number guarded.  The guard times io_uring,
	// then getsockopt, and a dump only once the cheaper of those takes
	// over dump_try_ns (a dump on a busy host can take tens of ms even for
	// one socket); then it uses the cheapest, timing each other one again
	// every 64th pass while it was within 4 times the cost of the chosen
	// one, every 4096th otherwise.
	// (The BPF source is not timed against the others: asked for, it is
	// used while it works.)
	int64_t source_ns_[4] = {0, 0, 0, 0};
	uint64_t passes_ = 0;

	// The event source (SOCKBUF_GUARD_EVENTS): loaded by the
	// constructor; its map of guarded sockets follows the set (add(),
	// remove(), compact(), under mu_); its ring is read under pass_mu_.
	bpf::event_source ev_;
	int ev_err_ = -EPERM; // 0: events drive the guard
	uint64_t ev_lost_seen_ = 0;
	std::vector<uint32_t> ev_inodes_;
	std::vector<size_t> ev_index_;
	// Sockets whose pending mark could not be cleared: they post no
	// record, so every round looks at them (and clears again) as if
	// they had posted one.  Under pass_mu_.
	std::vector<uint32_t> ev_unclear_;
	std::atomic<unsigned int> net_interval_us_{SOCKBUF_GUARD_NET_DEFAULT_US};
	// The interval the caller gave start() or timerfd(): with events on,
	// how soon a socket whose mark could not be cleared (it posts no
	// record) is looked at again, rather than at the next net's pass.
	std::atomic<unsigned int> poll_us_{0};
	int wake_fd_ = -1; // eventfd: stop() wakes the events thread
	// A descriptor number the guard keeps for pinning a socket when the
	// process is at its descriptor limit (a duplicate then fails with
	// EMFILE): dup3() into a number already held needs no free slot.
	// spare_fd_ is the slot, hold_fd_ (an eventfd) what it points to
	// between restores, so that the slot never keeps a socket alive.
	int spare_fd_ = -1, hold_fd_ = -1;
	int epoll_fd_ = -1; // timerfd() with events: the timer and the ring
	struct sockbuf_guard_event_totals ev_stats_ = {}; // under mu_

	// The hand-over (guard_handover.cc), under pass_mu_ but for the
	// atomics.  While sockbufd serves this guard's floors, served_fd_
	// holds its pidfd (readable when it exits; the thread driver waits on
	// it), the event programs are closed (events_parked_: reopened at the
	// resume) and passes run at the net interval only.
	// Moves when the event source is closed or opened again: a thread's
	// epoll set holding the old ring is made again.
	std::atomic<uint64_t> ev_gen_{0};
	int64_t handover_check_ns_ = 0; // the next look for a daemon
	int64_t served_full_ns_ = 0;	// the next safety-net pass while served
	int64_t served_since_ns_ = 0;
	struct sockbuf_guard_daemon_totals dm_stats_ = {}; // under mu_
	std::atomic<int> served_fd_{-1};
	// The daemon's progress file (daemon_progress.h) while it serves, or
	// while the guard looks at one: its last pass count and bounds, and
	// when its last pass ended on this guard's clock.
	int progress_fd_ = -1;
	uint64_t dm_passes_ = 0;
	int64_t dm_beat_ns_ = 0;
	uint64_t own_timens_ = 0;
	progress::bounds dm_bounds_; // 12 bytes: the word below fills it to 16
	// The event programs' attached() bits when they were parked: what
	// the guard watches again at a resume (own_bounds()).
	unsigned int parked_attached_ = 0;
	bool events_parked_ = false;
	bool forked_ = false; // a forked child's copy: its floors are in no table of its own
	// A floor the registry did not take (table full, publication off):
	// the daemon cannot see it, so this guard never hands over.
	std::atomic<bool> publish_failed_{false};
	std::atomic<bool> watching_{false}; // listeners_ not empty: no hand-over

	std::mutex mu_;				// the set and the totals; held briefly (see above)
	std::vector<listener_watch> listeners_; // under mu_
	// Connections a dump showed on a watched port that are in no
	// descriptor of this process: cookie -> passes left to look.  Under
	// pass_mu_.
	std::unordered_map<uint64_t, int> unmapped_;
	// Without inet_diag: bound sockets of this process found on no
	// watched port (their port cannot change).  Under pass_mu_.
	std::unordered_map<uint32_t, bool> foreign_;
	entry_store entries_;
	std::unordered_map<uint32_t, size_t> by_inode_; // live entries only
	std::unordered_multimap<int, size_t> by_fd_;	// every entry
	uint64_t next_seq_ = 1;
	int max_fd_ = -1; // the largest fd number ever added: the slots' room
	struct sockbuf_guard_totals stats_ = {};
	int timer_fd_ = -1;
	pid_t timer_owner_ = 0; // the process whose timer it is (a child's copy is not read)

	std::mutex run_mu_; // the thread's start/stop
	std::thread thread_;
	std::atomic<uint32_t> stop_word_{0}; // a futex word: 1 stops the thread
	static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
	// The driver's interval, 0 without one.  Written under run_mu_ by
	// set_interval(), which also moves drive_epoch_ on; read by passes
	// (any thread) to tell when the next full pass is due.
	std::atomic<unsigned int> interval_us_{0};
	std::atomic<uint32_t> drive_epoch_{0};
	void set_interval(unsigned int interval_us);
	// When the next full pass is due under the driver of due_epoch_
	// (under pass_mu_): a pass that starts later was scheduled late by
	// the difference (sockbuf_guard_totals.max_late_us).
	uint32_t due_epoch_ = 0;
	int64_t due_ns_ = 0;
	int64_t late_ns(int64_t t0) const;
	void plan_due(int64_t t0, int64_t duration_ns);
};

} // namespace sockbuf::guard
