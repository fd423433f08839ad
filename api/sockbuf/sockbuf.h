/* SPDX-License-Identifier: MIT */
/*
 * sockbuf.h - size TCP socket buffers without switching autotuning off.
 *
 * The whole C API of libsockbuf, meant to be read top to bottom.
 *
 * Three operations on a socket:
 *   sockbuf_set_initial_bufsize()  start at this size, keep kernel autotuning
 *   sockbuf_lock_bufsize()         fixed size, autotuning off (said out loud)
 *   sockbuf_check_floor() /
 *   sockbuf_restore_floor()        the min-floor: nothing may shrink a buffer
 *                                  below the size set_initial established
 *   sockbuf_guard_*()              a guard that checks and restores floors
 *                                  for many sockets, on a thread or a timerfd
 *
 * ONE UNIT EVERYWHERE.  Every size in this API is the value the kernel
 * stores in sk_sndbuf/sk_rcvbuf and getsockopt(SO_SNDBUF/SO_RCVBUF) returns.
 * setsockopt() doubles what it is given; the library halves before it calls
 * setsockopt() and reports what the kernel made of it.  A request of 262144
 * gives a socket that reads back 262144 (or a report that says why not).
 *
 * RETURNS.  Kernel style: 0 (or a non-negative value where documented) on
 * success, a negative errno value on failure.  errno itself is not used.
 *
 * APPLY BEFORE THE HANDSHAKE.  The TCP window scale is fixed when the
 * connection is set up.  Call set_initial on a listening socket before
 * listen() (accepted sockets inherit its sizes and lock bits) or on a
 * client socket before connect().  A call on a connected socket still sets
 * the size, and its report carries SOCKBUF_R_AFTER_HANDSHAKE.
 *
 * THREADS.  Every call is thread-safe, and calls on the same fd from
 * different threads of this process run one at a time, so that one thread
 * setting the send buffer and another the receive buffer end with the lock
 * bits both reports state (SO_BUF_LOCK keeps both bits in one value).  Not
 * serialised: the same socket reached through a different fd (dup(),
 * SCM_RIGHTS, another process), or the program's own setsockopt() on the
 * socket while a call runs; a report then says what the call did and read,
 * which the other writer may have changed since.  A call made from a
 * signal handler that interrupted a call on the same fd in the same thread
 * does not wait for it.  A child forked while a call ran in another thread
 * is not held up by it.  The only process-wide state besides that is the
 * probe cache, filled once.
 */
#ifndef SOCKBUF_SOCKBUF_H
#define SOCKBUF_SOCKBUF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SOCKBUF_STATIC_DEFINE)
#define SOCKBUF_API
#else
#define SOCKBUF_API __attribute__((visibility("default")))
#endif

/* Version as one number: major * 10000 + minor * 100 + patch (what it
 * promises: NEWS.md). */
#define SOCKBUF_VERSION 600 /* 0.6.0 */

/* The largest size any call accepts, in the library's unit.  The kernel
 * caps setsockopt values at INT_MAX / 2 before doubling; the library keeps
 * a margin below the kernel's own int arithmetic on buffer sizes. */
#define SOCKBUF_SIZE_MAX (0x7fffffff / 2)

/** enum sockbuf_dir - which buffer(s) a value speaks of; usable as bits. */
enum sockbuf_dir {
	SOCKBUF_SND = 1 << 0,
	SOCKBUF_RCV = 1 << 1,
	SOCKBUF_BOTH = SOCKBUF_SND | SOCKBUF_RCV,
};

/* ------------------------------------------------------------------------
 * Probe: what this kernel offers.
 * ---------------------------------------------------------------------- */

/** enum sockbuf_feature - mechanisms the library can use (bits). */
enum sockbuf_feature {
	/* SO_BUF_LOCK reads and sets the lock bits (Linux 5.15). */
	SOCKBUF_FEAT_BUF_LOCK = 1 << 0,
	/* SO_RCVLOWAT on TCP raises an unlocked sk_rcvbuf (about 4.18). */
	SOCKBUF_FEAT_RCVLOWAT_RAISE = 1 << 1,
	/* SO_RESERVE_MEM reserves memory for this process's sockets (5.16,
	 * needs memcg socket accounting). */
	SOCKBUF_FEAT_RESERVE_MEM = 1 << 2,
	/* CAP_NET_ADMIN is effective (libcap-ng): SO_*BUFFORCE may pass the
	 * net.core.[rw]mem_max clamp. */
	SOCKBUF_FEAT_FORCE = 1 << 3,
	/* getsockopt(TCP_INFO) answers: connection state and window scales. */
	SOCKBUF_FEAT_TCP_INFO = 1 << 4,
};

/**
 * struct sockbuf_probe_info - what sockbuf_probe() found.
 * @features:      SOCKBUF_FEAT_* usable by this process now.
 * @known:         SOCKBUF_FEAT_* the kernel recognises, usable or not
 *                 (e.g. SO_RESERVE_MEM known but no memcg accounting).
 * @sndbuf_max, @rcvbuf_max:     the largest size SO_SNDBUF/SO_RCVBUF can
 *                               give, in the library's unit like every size
 *                               here: twice net.core.[wr]mem_max (whose
 *                               value setsockopt() clamps to before
 *                               doubling).  Larger requests are cut to it
 *                               (SOCKBUF_CLAMP_MEM_MAX) unless FORCE is used.
 * @wmem_default, @rmem_default: net.core.[wr]mem_default: what a new
 *                               non-TCP socket starts with (stored as is).
 * @tcp_wmem, @tcp_rmem:         net.ipv4.tcp_[wr]mem (min, default, max).
 * @min_sndbuf, @min_rcvbuf:     smallest sizes the kernel stores
 *                               (SOCK_MIN_SNDBUF/SOCK_MIN_RCVBUF), measured.
 * @tcp_sndbuf, @tcp_rcvbuf:     sizes of a fresh, untouched TCP socket.
 * @release:       uname -r of the running kernel.
 * @quirks:        SOCKBUF_QUIRK_* behaviours found that the library works
 *                 around.
 * @reserve_state: enum sockbuf_reserve_state: why SO_RESERVE_MEM is or is
 *                 not usable by this process.  The probe's own
 *                 SO_RESERVE_MEM call decides usable or not; the cgroup
 *                 files only name the reason.
 *
 * Values from sysctls are -1 where those could not be read.  tcp_[wr]mem are per network
 * namespace: the values are those of the namespace the probe ran in.
 */
struct sockbuf_probe_info {
	uint32_t features;
	uint32_t known;
	int sndbuf_max;
	int rcvbuf_max;
	int wmem_default;
	int rmem_default;
	int tcp_wmem[3];
	int tcp_rmem[3];
	int min_sndbuf;
	int min_rcvbuf;
	int tcp_sndbuf;
	int tcp_rcvbuf;
	char release[65];
	char pad_[3];
	uint32_t quirks;
	int reserve_state;
	uint32_t reserved[14];
};

/**
 * enum sockbuf_reserve_state - why SO_RESERVE_MEM is usable or not.
 *
 * The kernel takes SO_RESERVE_MEM only on a socket charged to a memory
 * cgroup (sk_memcg), and it charges a socket, when it is made or accepted,
 * to the memory cgroup of the task making or accepting it only if that
 * cgroup is not the root one and socket accounting is on.  What to do is
 * in sockbuf_probe(3) and `sockbuf probe`.
 *
 * @SOCKBUF_RESERVE_UNKNOWN:   not usable, for a reason the cgroup files do
 *                             not show (or they could not be read).
 * @SOCKBUF_RESERVE_USABLE:    SO_RESERVE_MEM succeeded on the probe's socket.
 * @SOCKBUF_RESERVE_NO_OPTION: the kernel has no SO_RESERVE_MEM (before 5.16).
 * @SOCKBUF_RESERVE_ROOT_CGROUP: the process is in the root memory cgroup,
 *                             whose sockets are never charged.
 * @SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING: the memory controller is on a
 *                             cgroup v1 hierarchy and TCP accounting was
 *                             never switched on for this cgroup (nothing
 *                             wrote memory.kmem.tcp.limit_in_bytes).
 * @SOCKBUF_RESERVE_NOSOCKET:  booted with cgroup.memory=nosocket: no socket
 *                             is ever charged to a memory cgroup.
 * @SOCKBUF_RESERVE_NO_MEMORY_CONTROLLER: cgroup v2, and the memory controller
 *                             is not enabled for the process's cgroup (not
 *                             in its cgroup.controllers), or the kernel has
 *                             no memory controller at all.
 */
enum sockbuf_reserve_state {
	SOCKBUF_RESERVE_UNKNOWN = 0,
	SOCKBUF_RESERVE_USABLE,
	SOCKBUF_RESERVE_NO_OPTION,
	SOCKBUF_RESERVE_ROOT_CGROUP,
	SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING,
	SOCKBUF_RESERVE_NOSOCKET,
	SOCKBUF_RESERVE_NO_MEMORY_CONTROLLER,
};

/* SO_RCVBUF leaves a TCP window clamp that clearing the lock with
 * SO_BUF_LOCK does not remove (newest kernels, about 7.1).  Before the
 * handshake that clamp would fix a small window scale; the unlock strategy
 * resets it (SOCKBUF_R_WINDOW_CLAMPED where it cannot). */
#define SOCKBUF_QUIRK_RCVBUF_CLAMPS_WINDOW (1u << 0)

/* sockbuf_probe() flags */
#define SOCKBUF_PROBE_FRESH (1u << 0) /* probe again and replace the cache */

/**
 * sockbuf_probe() - report which buffer mechanisms this kernel offers.
 * @out:   filled with the result; may be NULL to only fill the cache.
 * @flags: 0 or SOCKBUF_PROBE_FRESH.
 *
 * The first call probes with real sockets (a few dozen syscalls) and caches
 * the result for the process; later calls copy the cache.  Every other call
 * of this API fills the cache on first use.  Thread-safe.
 *
 * Return: 0, or -EINVAL for unknown @flags, or the -errno of a failed
 * socket() when no probe socket can be made (e.g. -EMFILE).
 */
SOCKBUF_API int sockbuf_probe(struct sockbuf_probe_info *out, unsigned int flags);

/* ------------------------------------------------------------------------
 * Reports: what a call actually got.
 * ---------------------------------------------------------------------- */

/** enum sockbuf_strategy - how a buffer was set. */
enum sockbuf_strategy {
	SOCKBUF_STRAT_NONE = 0,	    /* this direction was not touched */
	SOCKBUF_STRAT_UNLOCK,	    /* SO_*BUF, then SO_BUF_LOCK cleared it */
	SOCKBUF_STRAT_RCVLOWAT,	    /* SO_RCVLOWAT raise, mark put back to 1 */
	SOCKBUF_STRAT_LOCK,	    /* SO_*BUF: locked, autotuning off */
	SOCKBUF_STRAT_FORCE_LOCK,   /* SO_*BUFFORCE: locked, past *mem_max */
	SOCKBUF_STRAT_FORCE_UNLOCK, /* SO_*BUFFORCE, then SO_BUF_LOCK cleared */
	SOCKBUF_STRAT_DEFAULT,	    /* left at the kernel's size (fallback) */
	SOCKBUF_STRAT_HELD,	    /* left as it was: already at or above the
				     * floor (restore) or the request (set_initial
				     * on a connected socket); unlocked if it can */
};

/** enum sockbuf_clamp - why a size differs from the request (bits). */
enum sockbuf_clamp {
	/* net.core.[wr]mem_max cut the request (SO_SNDBUF/SO_RCVBUF). */
	SOCKBUF_CLAMP_MEM_MAX = 1 << 0,
	/* Raised to SOCK_MIN_SNDBUF/SOCK_MIN_RCVBUF. */
	SOCKBUF_CLAMP_SOCK_MIN = 1 << 1,
	/* Odd request: the kernel stores even sizes; rounded down by 1. */
	SOCKBUF_CLAMP_ODD = 1 << 2,
	/* Unlocked and above net.ipv4.tcp_[wr]mem[2], the most autotuning
	 * grows to (SO_*BUFFORCE, or *mem_max above it, gets there).  Receive
	 * autotuning only raises: the size stays.  Send: it stays until the
	 * congestion window asks for more than the buffer holds, then
	 * tcp_sndbuf_expand() sets it to tcp_wmem[2]: guard the floor with
	 * force, or raise tcp_wmem[2] in a network namespace of its own. */
	SOCKBUF_CLAMP_TCP_MEM_MAX = 1 << 3,
	/* SO_RCVLOWAT capped at tcp_rmem[2] / 2. */
	SOCKBUF_CLAMP_RCVLOWAT_CAP = 1 << 4,
	/* The buffer was already larger and was not lowered: SO_RCVLOWAT
	 * only raises, and set_initial never lowers the buffer of a connected
	 * socket (autotuning grew it; the send buffer is expanded when the
	 * connection is established). */
	SOCKBUF_CLAMP_ALREADY_LARGER = 1 << 5,
};

/**
 * struct sockbuf_dir_report - one direction of a report.
 * @requested: size asked for (0: direction not touched).
 * @effective: getsockopt() value read back after the call.
 * @floor:     the floor this call established: min(@requested, @effective)
 *             for set_initial and restore, 0 for lock and for a direction
 *             left at the kernel's size (SOCKBUF_STRAT_DEFAULT: nothing
 *             set, nothing a guard could restore without locking).
 * @clamps:    SOCKBUF_CLAMP_* bits explaining @effective != @requested.
 * @locked:    1 locked, 0 unlocked, -1 unknown (kernel lacks SO_BUF_LOCK).
 * @strategy:  enum sockbuf_strategy used.
 */
struct sockbuf_dir_report {
	int requested;
	int effective;
	int floor;
	uint32_t clamps;
	int8_t locked;
	uint8_t strategy;
	uint8_t pad_[2];
};

/** enum sockbuf_report_flag - facts about a call as a whole (bits). */
enum sockbuf_report_flag {
	/* The socket had left CLOSE (connected, connecting or accepted): the
	 * window scale was already fixed; the size still changed. */
	SOCKBUF_R_AFTER_HANDSHAKE = 1 << 0,
	/* The socket is listening: sockets it accepts from now on inherit the
	 * sizes and lock bits; already-queued ones may not. */
	SOCKBUF_R_LISTENER = 1 << 1,
	/* A fallback was taken (SOCKBUF_F_FALLBACK_*). */
	SOCKBUF_R_FALLBACK = 1 << 2,
	/* A syscall failed after the socket had been changed: the report
	 * shows the state read back afterwards. */
	SOCKBUF_R_PARTIAL = 1 << 3,
	/* SOCKBUF_F_RESERVE_MEM was asked for and SO_RESERVE_MEM succeeded:
	 * THIS socket holds the reservation.  Sockets accepted from it do not
	 * inherit it: reserve on each accepted socket. */
	SOCKBUF_R_RESERVED = 1 << 4,
	/* SOCKBUF_F_RESERVE_MEM was asked for and no reservation is in force;
	 * @reserve_err says why. */
	SOCKBUF_R_RESERVE_FAILED = 1 << 5,
	/* SOCKBUF_F_ALLOW_FORCE was given but CAP_NET_ADMIN is not held
	 * (or the kernel said EPERM): the clamped size stands. */
	SOCKBUF_R_FORCE_DENIED = 1 << 6,
	/* SO_RCVLOWAT (kernels before 5.15) or SO_RCVBUF (about 7.1 and
	 * later) set a window clamp that could not be undone because the
	 * socket had left TCP_CLOSE: the kernel resets a clamp only before
	 * the handshake.  On a listener, connections made from it negotiate
	 * a window scale that caps their window near the initial size: call
	 * before listen().  On a connected socket the scale is already
	 * fixed; the clamp stays where the kernel set it until receive
	 * autotuning raises it with the buffer. */
	SOCKBUF_R_WINDOW_CLAMPED = 1 << 7,
};

/**
 * struct sockbuf_report - what a set/lock/restore call did.
 * @snd, @rcv:  per-direction details.
 * @flags:      SOCKBUF_R_* bits.
 * @tcp_state:  TCP state before the call (TCP_CLOSE, TCP_LISTEN, ...), or
 *              -1 for non-TCP sockets or when TCP_INFO is unavailable.
 * @reserve_err: with SOCKBUF_R_RESERVE_FAILED, why no reservation is in
 *              force: -ENOPROTOOPT the kernel has no SO_RESERVE_MEM (before
 *              5.16; upgrade), -EOPNOTSUPP the probe found it unusable for
 *              this process: the socket is charged to no memory cgroup;
 *              reserve_state of sockbuf_probe() says why (root cgroup, v1
 *              without TCP accounting, nosocket, no memory controller) and
 *              `sockbuf probe` what to change, -EINVAL the socket is
 *              listening (accepted sockets would not inherit it: reserve
 *              each accepted one) - in these three cases no syscall was
 *              made - or the -errno the kernel gave SO_RESERVE_MEM (-ENOMEM:
 *              the memory cgroup refused the charge, or net.ipv4.tcp_mem
 *              is under pressure; the buffers are set all the same).
 */
struct sockbuf_report {
	struct sockbuf_dir_report snd;
	struct sockbuf_dir_report rcv;
	uint32_t flags;
	int tcp_state;
	int reserve_err;
	uint32_t reserved[8];
};

/**
 * struct sockbuf_floor - the sizes a socket's buffers must not fall below.
 * @snd, @rcv: in the library's unit; 0 means no floor in that direction.
 *
 * The caller keeps it with the socket (the kernel has no place for it);
 * sockbuf_set_initial_bufsize() fills one through sockbuf_report_floor().
 * An accepted socket inherits its listener's sizes: pass the listener's
 * floor when checking it.
 */
struct sockbuf_floor {
	int snd;
	int rcv;
};

/* ------------------------------------------------------------------------
 * The operations.
 * ---------------------------------------------------------------------- */

/* Flags for sockbuf_set_initial_bufsize(), lock and restore. */
/* No way to keep autotuning on: lock the buffer at the size instead. */
#define SOCKBUF_F_FALLBACK_LOCK (1u << 0)
/* No way to keep autotuning on: leave the kernel's size alone. */
#define SOCKBUF_F_FALLBACK_DEFAULT (1u << 1)
/* Use SO_*BUFFORCE to pass net.core.[wr]mem_max when CAP_NET_ADMIN is
 * effective; set_initial then clears the lock and reads the size back.
 * Without the capability the clamped size stands, reported
 * (SOCKBUF_CLAMP_MEM_MAX, SOCKBUF_R_FORCE_DENIED). */
#define SOCKBUF_F_ALLOW_FORCE (1u << 2)
/* Also reserve memory with SO_RESERVE_MEM where the kernel allows: 2 x the
 * send floor + the receive floor + 64 KiB, the amount that keeps send-side
 * moderation after a failed charge (a memory cgroup at its limit) from
 * cutting the send buffer below its floor while the receive queue stays
 * within its own.  Alone it is no floor: under TCP memory pressure
 * (net.ipv4.tcp_mem, or the cgroup's socket pressure) the kernel (5.16+)
 * sets the send buffer of a reserved socket to the unused reservation,
 * reserved - queued, on each ACK (tcp_should_expand_sndbuf()), below the
 * floor while more than reserved - floor is queued, and no reservation
 * short of the whole send queue (up to tcp_wmem[2]) prevents it.  Reserve
 * mode's promise comes with a floor guard: add the socket to a guard made
 * with SOCKBUF_GUARD_RESERVE_MEM (it reserves the same amount when the
 * socket is added) and, where the kernel lets its programs load,
 * SOCKBUF_GUARD_EVENTS; the buffer is then restored within one interval
 * plus one pass, and the reservation only spares the guard the cuts of
 * moderation (sockbuf(7), docs/contract.md "Reserve mode"). */
#define SOCKBUF_F_RESERVE_MEM (1u << 3)
#define SOCKBUF_F_ALL_                                                                             \
	(SOCKBUF_F_FALLBACK_LOCK | SOCKBUF_F_FALLBACK_DEFAULT | SOCKBUF_F_ALLOW_FORCE |            \
	 SOCKBUF_F_RESERVE_MEM)

/**
 * sockbuf_set_initial_bufsize() - start buffers at a size, keep autotuning.
 * @fd:     a TCP socket (IPv4 or IPv6), best before listen()/connect().
 * @sndbuf: send buffer size, 0 to leave it alone.
 * @rcvbuf: receive buffer size, 0 to leave it alone.
 * @flags:  SOCKBUF_F_* bits.
 * @report: filled with what happened; may be NULL.
 *
 * Per direction, the first mechanism this kernel offers:
 *   1. SO_SNDBUF/SO_RCVBUF, then SO_BUF_LOCK clears that lock bit (5.15+);
 *   2. receive only: SO_RCVLOWAT of half the size raises sk_rcvbuf without
 *      locking; the caller's low-water mark is then put back, and a window
 *      clamp the raise set is undone (SOCKBUF_R_WINDOW_CLAMPED if not).
 *      Between the two setsockopt() calls the socket's SO_RCVLOWAT is half
 *      the size: a read racing with the call on another thread may wait
 *      for that much data (or a timeout) instead of the caller's mark;
 *   3. SOCKBUF_F_FALLBACK_LOCK: lock at the size; SOCKBUF_F_FALLBACK_DEFAULT:
 *      leave the kernel's size; neither: fail with -EOPNOTSUPP, untouched.
 * The floor is min(requested, effective) per direction.
 *
 * On a connected socket a buffer already at or above the request is not
 * lowered (SOCKBUF_STRAT_HELD, SOCKBUF_CLAMP_ALREADY_LARGER); it is
 * unlocked where SO_BUF_LOCK exists.
 *
 * Return: 0 on success; -EBADF (@fd negative or closed), -ENOTSOCK,
 * the -errno of a first probe that could not run (e.g. -EMFILE),
 * -EPROTOTYPE (not TCP: autotuning exists only for TCP), -EINVAL (negative
 * size, both zero, unknown flag, both fallback flags), -EOVERFLOW (size
 * above SOCKBUF_SIZE_MAX), -EOPNOTSUPP (no unlocked mechanism and no
 * fallback), or the -errno of a failing setsockopt/getsockopt.
 */
SOCKBUF_API int sockbuf_set_initial_bufsize(int fd, int sndbuf, int rcvbuf, unsigned int flags,
					    struct sockbuf_report *report);

/**
 * sockbuf_lock_bufsize() - fix buffer sizes and switch autotuning off.
 * @fd:     any socket that has buffers: TCP, UDP, UNIX.
 * @sndbuf: send buffer size, 0 to leave it alone.
 * @rcvbuf: receive buffer size, 0 to leave it alone.
 * @flags:  0 or SOCKBUF_F_ALLOW_FORCE.
 * @report: filled with what happened; may be NULL.
 *
 * What setsockopt(SO_SNDBUF/SO_RCVBUF) does, with the unit fixed and the
 * clamp reported.  For TCP this disables autotuning for the socket's life
 * unless SO_BUF_LOCK later clears the bit.
 *
 * Return: 0 on success; -EBADF, -ENOTSOCK, -EINVAL, -EOVERFLOW as for
 * set_initial, the -errno of a first probe that could not run, or the
 * -errno of a failing setsockopt/getsockopt.
 */
SOCKBUF_API int sockbuf_lock_bufsize(int fd, int sndbuf, int rcvbuf, unsigned int flags,
				     struct sockbuf_report *report);

/**
 * struct sockbuf_state - a socket's buffers as the kernel shows them now.
 * @sndbuf, @rcvbuf:  getsockopt(SO_SNDBUF/SO_RCVBUF).
 * @lock:       SOCKBUF_SND/SOCKBUF_RCV bits set, or -1 when the kernel has
 *              no SO_BUF_LOCK to read them.
 * @tcp_state:  TCP state, or -1 (not TCP, or no TCP_INFO).
 * @snd_wscale, @rcv_wscale: negotiated window scales, -1 before the
 *              handshake or for non-TCP sockets.
 * @domain, @type, @protocol: SO_DOMAIN, SO_TYPE, SO_PROTOCOL.
 */
struct sockbuf_state {
	int sndbuf;
	int rcvbuf;
	int lock;
	int tcp_state;
	int snd_wscale;
	int rcv_wscale;
	int domain;
	int type;
	int protocol;
	uint32_t reserved[7];
};

/**
 * sockbuf_get_state() - read a socket's buffer sizes, lock bits and state.
 * @fd:  any socket.
 * @out: filled on success.
 *
 * Return: 0, or -EBADF, -ENOTSOCK, -EINVAL (@out NULL), the -errno of a
 * first probe that could not run, or the -errno of a failing getsockopt.
 */
SOCKBUF_API int sockbuf_get_state(int fd, struct sockbuf_state *out);

/**
 * sockbuf_report_floor() - the floor a set_initial/restore report set up.
 * @report: a report filled by sockbuf_set_initial_bufsize() or restore.
 * @out:    receives {report->snd.floor, report->rcv.floor}.
 *
 * Return: 0, or -EINVAL when either pointer is NULL.
 */
SOCKBUF_API int sockbuf_report_floor(const struct sockbuf_report *report,
				     struct sockbuf_floor *out);

/**
 * sockbuf_check_floor() - has anything shrunk a buffer below its floor?
 * @fd:    a socket.
 * @floor: the floor to check against (0 in a direction: not checked).
 * @now:   filled with the state read; may be NULL.
 *
 * Return: 0 when both buffers are at or above the floor; a positive mask of
 * SOCKBUF_SND/SOCKBUF_RCV naming each direction below it; or -EBADF,
 * -ENOTSOCK, -EINVAL (@floor NULL or negative), -EOVERFLOW (above
 * SOCKBUF_SIZE_MAX), the -errno of a first probe that could not run (only
 * with @now), or the -errno of a failing getsockopt.
 */
SOCKBUF_API int sockbuf_check_floor(int fd, const struct sockbuf_floor *floor,
				    struct sockbuf_state *now);

/**
 * sockbuf_restore_floor() - raise buffers that fell below the floor.
 * @fd:     a TCP socket.
 * @floor:  the floor.
 * @flags:  as for set_initial.
 * @report: filled with what happened; directions already at or above the
 *          floor report SOCKBUF_STRAT_HELD.  May be NULL.
 *
 * Raises each direction below its floor back to it with the strategy
 * set_initial would use, so autotuning stays on where the kernel allows.
 * A buffer above its floor is never lowered.
 *
 * With SOCKBUF_F_RESERVE_MEM memory for the whole floor (2 x @floor->snd +
 * @floor->rcv + 64 KiB, as for set_initial) is reserved even when no
 * direction was below it, so that a socket
 * accepted at its listener's sizes gets the reservation it did not inherit.
 *
 * Return: the same values as sockbuf_set_initial_bufsize(); -EINVAL also
 * when @floor is NULL or has no direction set.
 */
SOCKBUF_API int sockbuf_restore_floor(int fd, const struct sockbuf_floor *floor, unsigned int flags,
				      struct sockbuf_report *report);

/* ------------------------------------------------------------------------
 * The floor guard: nothing keeps a floor in the kernel, so something must
 * look.  A guard holds sockets with their floors and, on each pass, raises
 * every buffer found below its floor back to it, unlocked where the kernel
 * allows (as sockbuf_restore_floor() would, from the sizes the pass read).  What it promises is
 * "restored within one period plus one pass" (sockbuf_guard_start()), not "never below": for that,
 * lock the buffer (a reservation, SOCKBUF_GUARD_RESERVE_MEM, spares the guard moderation's cuts but
 * not the kernel's reserve rule under TCP memory pressure: reserve mode keeps this same promise).
 * A pass that the scheduler starts late restores late: the guard measures by how much
 * (max_late_us of sockbuf_guard_stats()).  With SOCKBUF_GUARD_EVENTS, where the kernel lets
 * its BPF programs load, a cut made in the functions they watch is restored on the record it
 * posts, without waiting for a pass, within SOCKBUF_GUARD_EVENT_BOUND_US plus the record's wait
 * for the guard's thread (max_wait_ns of sockbuf_guard_event_stats()); passes remain the safety
 * net for the others.
 *
 * A restore writes through a duplicate of the socket's descriptor taken before its identity
 * check, never through the number; at the process's descriptor limit the duplicate goes into
 * a slot the guard keeps from sockbuf_guard_new() (two descriptors: an eventfd and the slot).
 *
 * A guard is named by a small non-negative id, like an fd: a call on an id
 * that was destroyed (or never made) returns -EBADF, never touches freed
 * memory.  All calls are thread-safe.  add() and remove() wait for at most
 * one restore in progress (a few system calls), never for a whole pass;
 * once remove() has returned, no pass writes through the socket removed.
 * A child forked while a guard call or a pass runs in another thread is
 * not held up by it: the child gets a copy of each guard (same sockets,
 * no thread, not the parent's timer, BPF array or rings) and its calls
 * never touch the parent's guard.
 * ---------------------------------------------------------------------- */

/* sockbuf_guard_new() flags */
/* Restore with SO_*BUFFORCE where CAP_NET_ADMIN allows (SOCKBUF_F_ALLOW_FORCE). */
#define SOCKBUF_GUARD_ALLOW_FORCE (1u << 0)
/* Reserve mode: reserve memory for each socket's floor with SO_RESERVE_MEM
 * when it is added (as SOCKBUF_F_RESERVE_MEM) and re-apply it on each
 * restore.  The promise stays the guard's, restored within one interval
 * plus one pass: under TCP memory pressure the kernel sets a reserved
 * socket's send buffer to the unused reservation, below the floor (see
 * SOCKBUF_F_RESERVE_MEM); the reservation keeps moderation after a failed
 * charge from cutting below it. */
#define SOCKBUF_GUARD_RESERVE_MEM (1u << 1)
/* Never use inet_diag: io_uring or getsockopt, one read per socket per pass. */
#define SOCKBUF_GUARD_NO_DIAG (1u << 2)
/* Let a forked child run passes on the sockets it shares with its parent
 * (by default a pass in a child returns -ECHILD: the parent guards them). */
#define SOCKBUF_GUARD_RUN_IN_CHILD (1u << 3)
/* Never use io_uring (for a process whose seccomp filter kills rather than
 * refuses io_uring_setup). */
#define SOCKBUF_GUARD_NO_URING (1u << 4)
/* Read every socket in one BPF iterator over the process's files: the
 * kernel crossed once per pass, not once per socket (cheaper than io_uring
 * from a few hundred sockets up: sockbuf_guard_new(3)).  Needs CAP_BPF and CAP_PERFMON (or
 * root), Linux 6.1 with BTF, and a library built with libbpf; where any is
 * missing the guard uses its other sources and says why in
 * sockbuf_guard_totals.bpf_err. */
#define SOCKBUF_GUARD_BPF (1u << 5)
/* Wake on the kernel's cuts instead of polling for them: BPF programs on
 * the exit of __sk_mem_raise_allocated() (memory pressure, memcg limits),
 * of tcp_check_space() or __tcp_check_space() (the send buffer's reserve
 * rule and growth), of sk_page_frag_refill() and tcp_stream_alloc_skb()
 * (sk_stream_alloc_skb() before 5.18; failed allocations), and of
 * sk_setsockopt() (from Linux 6.1: anyone's SO_SNDBUF or SO_RCVBUF
 * write, SO_BUF_LOCK flip) post each guarded socket found below
 * its floor to a ring buffer; the guard wakes on it and restores the
 * sockets named, through the same restore and identity check as a pass.
 * Passes become a safety net for cuts made elsewhere (kTLS offload, MPTCP,
 * lost records):
 * every SOCKBUF_GUARD_NET_DEFAULT_US (60 s) by default (sockbuf_guard_set_net_interval()), whatever
 * the interval given to sockbuf_guard_start() or sockbuf_guard_timerfd(), which stays the polling
 * interval where events are unavailable.  Needs CAP_BPF and CAP_PERFMON (or root), BTF, fexit and
 * the BPF ring buffer (Linux 5.8) and a library built with libbpf; where any is missing the guard
 * polls as without the flag and sockbuf_guard_events() says why. */
#define SOCKBUF_GUARD_EVENTS (1u << 6)
/* Never hand this guard's sockets over to sockbufd(8).  By default a guard
 * driven by sockbuf_guard_start() or sockbuf_guard_timerfd() whose floors
 * are all published finds a root sockbufd serving its network namespace
 * (at its first pass, then at most once a second) and stands down, but
 * only for a daemon that keeps every kind of cut at least as soon as the
 * guard itself: the daemon's progress file says how late it sees a cut by
 * memory pressure (0 with its event programs) and one by a socket-option
 * write (setsockopt() of SO_SNDBUF or SO_RCVBUF, SO_BUF_LOCK: 0 where its
 * programs watch sk_setsockopt(), else its full
 * passes' interval), and neither may exceed the guard's own (the polling
 * interval given; with events, 0, and 0 or the safety net's for writes).  Standing down, its event
 * programs are closed and a full pass runs only at the safety net's
 * interval; at its own interval the guard still looks, for microseconds,
 * at the daemon's pidfd and progress.  It takes its sockets back, and the
 * same pass restores what is below, when the daemon exits, when the
 * daemon's last pass is older than twice its loop's period plus 5 ms and
 * the guard's interval (stopped, hung, overloaded), or when its bounds no
 * longer cover the guard's: a cut is then back within about twice the
 * guard's interval, never at the safety net's.
 * sockbuf_guard_daemon_stats() says which serves, and why not. */
#define SOCKBUF_GUARD_NO_DAEMON (1u << 7)
/* The safety net's default interval (sockbuf_guard_set_net_interval()), in
 * microseconds: the net is left with the cuts nothing watches (why this
 * value: sockbuf_guard_new(3), "Events"). */
#define SOCKBUF_GUARD_NET_DEFAULT_US 60000000u
/* How long a cut that the event programs saw may leave a buffer below its
 * floor, in microseconds, from the exit of the kernel function that made
 * it to the exit of the guard's setsockopt() that restores it, besides the
 * time its record waited for the guard's thread (max_wait_ns of
 * sockbuf_guard_event_totals, which the guard measures: scheduling, and
 * page faults that wait on the kernel's memory management).  The contract
 * suite checks every such cut against it on the kernel's clock
 * (docs/contract.md, "The floor judge"). */
#define SOCKBUF_GUARD_EVENT_BOUND_US 50000

/* Where a pass read the sizes: sockbuf_guard_report.diag and
 * sockbuf_guard_totals.source. */
#define SOCKBUF_GUARD_SRC_GETSOCKOPT 0 /* getsockopt per socket */
#define SOCKBUF_GUARD_SRC_DIAG 1       /* one inet_diag dump */
#define SOCKBUF_GUARD_SRC_URING 2      /* batched getsockopt over io_uring */
#define SOCKBUF_GUARD_SRC_BPF 3	       /* one BPF iterator (SOCKBUF_GUARD_BPF) */

/**
 * struct sockbuf_guard_report - what one pass found and did.
 * @sockets:     registered sockets looked at.
 * @below:       directions found below their floor.
 * @restored:    directions raised back to their floor.
 * @errors:      restores that failed (the socket stays registered).
 * @removed:     sockets that had closed (or whose fd now names another
 *               socket), dropped from the guard.  Sockets taken out with
 *               sockbuf_guard_remove() are not counted.
 * @worst_depth: the largest floor - size seen in this pass, 0 if none.
 * @diag:        where the sizes came from: SOCKBUF_GUARD_SRC_GETSOCKOPT (0),
 *               SOCKBUF_GUARD_SRC_DIAG (1, one inet_diag dump) or
 *               SOCKBUF_GUARD_SRC_URING (2, batched getsockopt over
 *               io_uring) or SOCKBUF_GUARD_SRC_BPF (3, one BPF iterator,
 *               SOCKBUF_GUARD_BPF): test "== SOCKBUF_GUARD_SRC_DIAG" for a
 *               dump, not "!= 0".
 * @duration_ns: how long the pass took (CLOCK_MONOTONIC).
 * @reused:      of @removed, those whose fd was found naming another
 *               socket (the number closed and reused): dropped, never
 *               written through.
 * @adopted:     connections accepted from a watched listener that this
 *               pass found and added (sockbuf_guard_add_listener()).
 */
struct sockbuf_guard_report {
	int sockets;
	int below;
	int restored;
	int errors;
	int removed;
	int worst_depth;
	int diag;
	int pad_;
	int64_t duration_ns;
	int reused;
	int adopted;
	uint32_t reserved[2];
};

/**
 * struct sockbuf_guard_totals - totals since sockbuf_guard_new().
 * @passes, @below, @restored, @errors, @removed: sums over all passes.
 *                  With SOCKBUF_GUARD_EVENTS @passes counts full passes
 *                  only; the rounds on records are counted in
 *                  sockbuf_guard_event_totals, and what they find and do
 *                  in @below, @restored, @errors and @removed too.
 * @sockets:        registered now.
 * @worst_depth:    the largest floor - size ever seen.
 * @max_pass_ns:    the longest pass.
 * @last_pass_ns:   the last pass.
 * @total_pass_ns:  all passes together: divided by the time the guard has
 *                  run, an upper bound on the share of a core it takes.
 * @diag_err:       0 while passes may use inet_diag; otherwise why they do
 *                  not (-EPROTONOSUPPORT no inet_diag in this kernel,
 *                  -EACCES, ..., -EPERM for SOCKBUF_GUARD_NO_DIAG).
 * @interval_us:    the background thread's or timer's interval, 0 if none.
 * @reserve_ok:     with SOCKBUF_GUARD_RESERVE_MEM: reservations for a
 *                  socket's whole floor that SO_RESERVE_MEM took, at
 *                  sockbuf_guard_add() and at restores.
 * @reserve_failed: the same that did not take (the socket stays guarded);
 *                  listening sockets are never reserved and not counted.
 * @reserve_err:    the reserve_err of the last failure (see struct
 *                  sockbuf_report), 0 if none.
 * @uring_err:      0 while passes may use io_uring (or none has tried yet);
 *                  otherwise why they do not: -ENOSYS or -EPERM (no
 *                  io_uring, kernel.io_uring_disabled, seccomp; -EPERM also
 *                  for SOCKBUF_GUARD_NO_URING), -EINVAL (no
 *                  IORING_OP_URING_CMD: before Linux 5.19), -EOPNOTSUPP (no
 *                  socket commands: before 6.7), -ENOMEM, or the -errno of
 *                  a ring that failed during a pass.
 * @source:         the last pass's source, SOCKBUF_GUARD_SRC_* (0 before
 *                  any pass).
 * @bpf_err:        with SOCKBUF_GUARD_BPF: 0 while passes use the BPF
 *                  iterator (or none has tried yet); otherwise why not:
 *                  -EOPNOTSUPP (library built without libbpf), -EPERM (no
 *                  CAP_BPF/CAP_PERFMON, or bpf() refused), -EINVAL or
 *                  -ENOENT (no BTF, no task_file iterator, no iterator
 *                  limited to one process: before 6.1), -ERANGE (an fd
 *                  number past 2^20), -ENOMEM, or the -errno of an
 *                  iterator that failed during a pass.  -EPERM without
 *                  the flag.
 *
 * @reused:         the sum of sockbuf_guard_report.reused: entries dropped
 *                  because their fd named another socket.
 *
 * @max_late_us:    the longest a full pass started after it was due
 *                  while a driver ran it (sockbuf_guard_start() or
 *                  sockbuf_guard_timerfd()): due one interval after the
 *                  previous pass began, or as long after its end as it
 *                  took, whichever is later.  How late the guard's thread,
 *                  or the caller's loop around its timer, was scheduled:
 *                  a cut can stay unrestored for the interval, this and
 *                  one pass.  Counted from the driver's second pass;
 *                  saturates at UINT32_MAX.
 */
struct sockbuf_guard_totals {
	uint64_t passes;
	uint64_t below;
	uint64_t restored;
	uint64_t errors;
	uint64_t removed;
	int sockets;
	int worst_depth;
	int64_t max_pass_ns;
	int64_t last_pass_ns;
	int64_t total_pass_ns;
	int diag_err;
	unsigned int interval_us;
	uint32_t reserve_ok;
	uint32_t reserve_failed;
	int reserve_err;
	int uring_err;
	int source;
	int bpf_err;
	uint32_t reused;
	uint32_t max_late_us;
};

/**
 * sockbuf_guard_new() - make an empty floor guard.
 * @flags: SOCKBUF_GUARD_* bits.
 *
 * Return: the guard's id (>= 0), or -EINVAL (unknown flag), -EMFILE (too
 * many guards in this process: 64), -ENOMEM, or the -errno of a first
 * probe that could not run.
 */
SOCKBUF_API int sockbuf_guard_new(unsigned int flags);

/**
 * sockbuf_guard_destroy() - stop a guard's thread or timer and free it.
 * @guard: its id.
 *
 * Safe while its thread runs (the thread is stopped and joined first) and
 * while another thread is inside a call on it (that call finishes on the
 * guard it started with).  The sockets are not touched.
 *
 * Return: 0 or -EBADF.
 */
SOCKBUF_API int sockbuf_guard_destroy(int guard);

/**
 * sockbuf_guard_add() - guard a socket's floor.
 * @guard: the guard.
 * @fd:    a TCP socket (listening, connected or not yet either).
 * @floor: the floor; a direction at 0 is not guarded.
 *
 * The socket leaves the guard by itself when it closes, or with
 * sockbuf_guard_remove() (call it before close() to have the socket leave
 * at once).  A closed fd leaves at the next pass (its read fails).  If
 * the number has meanwhile been reused for another socket, the guard never
 * restores through it: every restore checks, right before its first
 * write, that the fd still names the socket added (SO_COOKIE, or the
 * inode), whatever source found it below; one that names another socket
 * leaves unwritten (counted in reused).  An entry whose new socket is not
 * below the old floor leaves within 32 passes of the reuse (the identity
 * sweep: see sockbuf_guard_pass()).  The check and the writes go through
 * the guard's own duplicate of the fd (F_DUPFD_CLOEXEC, taken before the
 * check, closed after the writes; no fork() copies it), so the number
 * re-pointed in between is never written through.  With no descriptor
 * to spare (EMFILE) the socket is not written and the pass counts an
 * error.  Sockets accepted from a guarded listener are not guarded: add
 * each one, or watch the listener with sockbuf_guard_add_listener().
 *
 * With SOCKBUF_GUARD_RESERVE_MEM memory for the socket's floor (2 x
 * @floor->snd + @floor->rcv + 64 KiB, as for set_initial) is reserved with
 * SO_RESERVE_MEM when it is added (not on a
 * listening socket: accepted sockets do not inherit a reservation, add
 * each of them).  A reservation that fails does not refuse the add: it is
 * counted in reserve_failed and reserve_err of sockbuf_guard_stats().
 *
 * Return: 0, or -EBADF (bad guard, or @fd negative or closed), -ENOTSOCK,
 * -EPROTOTYPE (not TCP), -EINVAL (@floor NULL, negative or both 0),
 * -EOVERFLOW (above SOCKBUF_SIZE_MAX), -ERANGE (above what the kernel can
 * store without SO_*BUFFORCE: sndbuf_max/rcvbuf_max of sockbuf_probe(),
 * unless the guard may force and CAP_NET_ADMIN is held), -EEXIST (this
 * socket is already in the guard, through this fd or another), -ENOMEM.
 */
SOCKBUF_API int sockbuf_guard_add(int guard, int fd, const struct sockbuf_floor *floor);

/**
 * sockbuf_guard_add_listener() - guard every connection accepted from a
 * listening socket with a floor, whoever calls accept().
 * @guard: the guard.
 * @fd:    a listening TCP socket (after listen()).
 * @floor: the floor each accepted connection gets; a direction at 0 is
 *         not guarded.  Usually the listener's own (sockbuf_report_floor()
 *         of the sockbuf_set_initial_bufsize() made before listen()).
 *
 * For servers whose accept() runs inside a framework (an RPC library's
 * dispatcher, an event loop's acceptor): the program never sees the
 * connection's descriptor when it is made.  At the start of every full
 * pass the guard looks for connections of this process accepted from the
 * listener, by the listener's address family, local port and (unless it
 * is bound to the wildcard address) local address: one inet_diag dump
 * filtered by the port (or, without inet_diag, the process's descriptor
 * table), then /proc/self/fd for the descriptor of each socket not
 * guarded yet.  Each one found is taken only when a duplicate of its
 * descriptor still names the socket seen (its inode), and is then guarded
 * as by sockbuf_guard_add() with @floor, checked in the same pass.  Only
 * this process's descriptors are looked at: a connection held by another
 * process (a forked worker) is never touched; one the dump shows that is
 * not in this process's table is looked for in three passes, then left.
 * The listener itself is identity-checked at every pass (its inode): once
 * its descriptor is closed or names another socket, the watch ends; the
 * connections taken stay guarded until they close.
 *
 * An accepted connection is thus guarded from the first full pass after
 * accept(), and a cut restored within one period plus one pass after
 * that: with sockbuf_guard_start() two periods and a pass from accept()
 * at worst.  With SOCKBUF_GUARD_EVENTS full passes come at the safety
 * net's interval (sockbuf_guard_set_net_interval()), which then bounds
 * how soon a new connection is taken.  A guard that watches a listener
 * does not hand its sockets over to sockbufd(8), which does not follow
 * listeners.  sockbuf_guard_remove() on the listener's descriptor ends
 * the watch.  A connection a program made itself from the listener's
 * port and address (bind() with SO_REUSEADDR, then connect()) cannot be
 * told from an accepted one and is guarded too.
 *
 * Return: 0, or -EBADF (bad guard, or @fd negative or closed), -ENOTSOCK,
 * -EPROTOTYPE (not TCP, e.g. UDP), -EINVAL (@floor NULL, negative or both
 * 0, or @fd is a TCP socket that is not listening), -EOVERFLOW, -ERANGE
 * (as for sockbuf_guard_add()), -EEXIST (this listener is watched
 * already), -ENOMEM.
 */
SOCKBUF_API int sockbuf_guard_add_listener(int guard, int fd, const struct sockbuf_floor *floor);

/**
 * sockbuf_guard_remove() - stop guarding the socket of @fd.
 *
 * The socket is the one @fd names now (its inode): an entry left by a
 * closed socket whose number was reused is never the one removed.  An
 * @fd that names no socket any more takes every entry under its number
 * with it.  O(1); waits for one restore in progress at most.
 *
 * Return: 0, or -EBADF (bad guard), -ENOENT (the socket of @fd is not in
 * the guard).
 */
SOCKBUF_API int sockbuf_guard_remove(int guard, int fd);

/**
 * sockbuf_guard_pass() - check every registered socket once, restore what
 * is below its floor.
 * @guard: the guard.
 * @out:   what the pass found and did; may be NULL.
 *
 * Sizes come from one of three sources (SOCKBUF_GUARD_SRC_*; a fourth
 * with SOCKBUF_GUARD_BPF, below): batched
 * getsockopt over io_uring (IORING_OP_URING_CMD, Linux 6.7; thousands of
 * reads per io_uring_enter), getsockopt per socket, or one inet_diag dump
 * of this network namespace's TCP sockets (SK_MEMINFO; only the guarded
 * sockets' address family).  io_uring and getsockopt make one read per
 * socket: SO_MEMINFO when both directions are guarded (Linux 4.12; two
 * reads where the kernel lacks it), SO_SNDBUF or SO_RCVBUF when one is.
 * A socket the chosen source could not read (closed, reused fd, other
 * namespace) is read with getsockopt.  Whether the fd still names the
 * socket added (SO_COOKIE, or its inode without a cookie) is checked
 * right before the first write of every restore, whatever source read the
 * socket (one that fails leaves unrestored), and by a rolling sweep:
 * ceil(n/16) of the n sockets per pass (an entry moved by the removal of
 * others may wait one more round).  A dump
 * costs mostly the kernel's walk of its whole socket table, whatever the
 * number guarded.  The guard times io_uring on its first pass, getsockopt
 * on the next, a dump only once one of those took over 1 ms of CPU; it
 * then uses the cheapest and times each other source again every 64th
 * pass (every 4096th when it cost over 4 times as much).  Sources are
 * compared by the CPU time of their last pass (CLOCK_THREAD_CPUTIME_ID),
 * so a pass preempted on a busy host does not mislead the choice.  The io_uring ring is made
 * on the first pass that wants it, belongs to the guard, and is made
 * anew in a forked child; if it cannot be made, or fails, passes fall back
 * for good and sockbuf_guard_totals.uring_err says why.
 *
 * With SOCKBUF_GUARD_BPF every pass uses a fourth source where it can:
 * one BPF task_file iterator over this process's files (Linux 6.1, BTF,
 * CAP_BPF and CAP_PERFMON), loaded on the first pass and in a forked
 * child anew.  It writes each guarded socket's sizes into an array the
 * guard maps, only for a file whose inode is the socket's added: every
 * pass checks the identity of every socket, and a closed or reused fd
 * leaves at that pass.  It cannot be loaded, or fails: passes use the
 * other sources for good, and sockbuf_guard_totals.bpf_err says why.
 * @out->diag says which source a pass used.  A restore starts from the
 * sizes the pass read: the identity check, then per direction restored
 * one SO_SNDBUF/SO_RCVBUF and its read-back, then SO_BUF_LOCK (read
 * first when one direction is restored): at most two reads besides the
 * identity check.  If the guard has a timer
 * (sockbuf_guard_timerfd()), the pass also consumes its expirations.
 *
 * With events on (SOCKBUF_GUARD_EVENTS) a pass first reads the ring
 * buffer and checks and restores the sockets its records name (the same
 * restore, identity check first), then makes the full pass above, unless
 * the guard has an events timer (sockbuf_guard_timerfd()) that has not
 * fired and no record was lost: then only the sockets named are looked
 * at.
 *
 * Return: 0, or -EBADF (bad guard), -ECHILD (a forked child, without
 * SOCKBUF_GUARD_RUN_IN_CHILD).  Failures on single sockets are counted in
 * @out, not returned.
 */
SOCKBUF_API int sockbuf_guard_pass(int guard, struct sockbuf_guard_report *out);

/**
 * sockbuf_guard_start() - run passes on a background thread.
 * @guard:       the guard.
 * @interval_us: time from the start of one pass to the start of the next,
 *               or longer: the thread rests at least as long as a pass
 *               took, so it never takes more than half a core (passes of
 *               6 ms at a 10 ms interval start every 12 ms); 100 to
 *               600,000,000 (ten minutes).  A socket cut just after a pass read it is
 *               restored by the next pass: within one such period plus
 *               one pass, once the thread is scheduled
 *               (sockbuf_guard_totals.max_late_us says how late it was).
 *
 * Return: 0, or -EBADF, -EINVAL (interval out of range), -EALREADY (a
 * thread or a timer already drives this guard), -EAGAIN (no thread could
 * be made).
 */
SOCKBUF_API int sockbuf_guard_start(int guard, unsigned int interval_us);

/**
 * sockbuf_guard_stop() - stop the background thread and wait for it.
 *
 * Return: 0, or -EBADF, -ENOENT (no thread runs).
 */
SOCKBUF_API int sockbuf_guard_stop(int guard);

/**
 * sockbuf_guard_timerfd() - drive the guard from the caller's event loop.
 * @guard:       the guard.
 * @interval_us: as for sockbuf_guard_start().
 *
 * Makes a periodic timerfd (CLOCK_MONOTONIC, non-blocking, close-on-exec)
 * that becomes readable every @interval_us.  Add it to epoll/poll; when it
 * is readable call sockbuf_guard_pass(), which reads it.  The guard owns
 * the fd: do not close it; sockbuf_guard_destroy() does.
 *
 * With events on (SOCKBUF_GUARD_EVENTS, sockbuf_guard_event_stats().err
 * 0) the fd returned is an epoll fd that holds the timer (at the safety
 * net's interval) and the ring buffer: it is readable when the timer
 * fired or records wait.  sockbuf_guard_pass() then restores the sockets
 * the records name, and makes a full pass only when the timer fired or
 * records were lost.
 *
 * Return: the timerfd, or -EBADF, -EINVAL, -EALREADY as for start, or the
 * -errno of timerfd_create()/timerfd_settime().
 */
SOCKBUF_API int sockbuf_guard_timerfd(int guard, unsigned int interval_us);

/**
 * sockbuf_guard_stats() - totals since the guard was made.
 *
 * Return: 0, or -EBADF, -EINVAL (@out NULL).
 */
SOCKBUF_API int sockbuf_guard_stats(int guard, struct sockbuf_guard_totals *out);

/* The kernel functions the event source is attached to
 * (sockbuf_guard_event_totals.attached). */
#define SOCKBUF_GUARD_EV_MEM_RAISE (1u << 0)	       /* __sk_mem_raise_allocated */
#define SOCKBUF_GUARD_EV_CHECK_SPACE (1u << 1)	       /* tcp_check_space */
#define SOCKBUF_GUARD_EV_DUNDER_CHECK_SPACE (1u << 2)  /* __tcp_check_space */
#define SOCKBUF_GUARD_EV_FRAG_REFILL (1u << 3)	       /* sk_page_frag_refill */
#define SOCKBUF_GUARD_EV_ALLOC_SKB (1u << 4)	       /* tcp_stream_alloc_skb (5.18) */
#define SOCKBUF_GUARD_EV_SK_STREAM_ALLOC_SKB (1u << 5) /* its name before 5.18 */
#define SOCKBUF_GUARD_EV_SK_SETSOCKOPT (1u << 6)       /* sk_setsockopt (from 6.1) */

/**
 * struct sockbuf_guard_event_totals - the event source, since
 * sockbuf_guard_new() (SOCKBUF_GUARD_EVENTS).
 * @err:            0 while events drive the guard; otherwise why it polls
 *                  instead: -EPERM (no CAP_BPF/CAP_PERFMON, or bpf()
 *                  refused; also without the flag), -ENOENT (no BTF, or
 *                  none of the kernel functions), -EINVAL (the verifier
 *                  refused the programs, no fexit or ring buffer: before
 *                  5.8), -EOPNOTSUPP (library built without libbpf),
 *                  -ECHILD (a forked child's copy of the guard: the
 *                  parent's programs are not its own), -ENOMEM, -EBUSY
 *                  (sockbufd serves the guard's floors: its programs are
 *                  closed until the daemon exits; SOCKBUF_GUARD_NO_DAEMON).
 * @attached:       SOCKBUF_GUARD_EV_* bits: the functions watched.
 * @net_interval_us: the safety-net passes' interval while events are on.
 * @records:        records read: sockets the kernel left below a floor.
 * @lost:           records never read: those the ring buffer had no room
 *                  for, and the programs' runs the kernel skipped
 *                  (bpf_prog_info's recursion_misses, 5.12: a trampoline
 *                  does not run a program already running on that CPU,
 *                  under a softirq or a preempted task), each a cut
 *                  that may have posted nothing.  Each loss is followed
 *                  by a full pass; the guard's thread looks at the count
 *                  at every round and at least once a second,
 *                  sockbuf_guard_timerfd()'s caller at every round it
 *                  runs (on records or its timer).
 * @rounds:         wakeups on records (each restores the sockets named).
 * @restored_events: directions restored because a record named them.
 * @restored_passes: directions restored by full passes (the safety net,
 *                  or every pass when events are off).
 * @dropped:        records whose socket had left the guard, or whose fd
 *                  no longer named it (the identity check): not written.
 * @watch_err:      sockets the event map could not take (-errno of the
 *                  last; they are still guarded by passes).
 * @total_round_ns: the rounds on records together (wall time, as
 *                  total_pass_ns of sockbuf_guard_totals for passes): the
 *                  two summed, divided by the time the guard has run, are
 *                  an upper bound on the share of a core it takes.
 * @clear_failed:   failed clears of a socket's pending mark (the event
 *                  map could not allocate).  Each is tried again at once;
 *                  a socket whose mark stays set posts no record, so
 *                  every round looks at it and clears again until one
 *                  succeeds; meanwhile the guard makes a round every
 *                  polling interval (the one given to sockbuf_guard_start()
 *                  or sockbuf_guard_timerfd(), whose timer then fires at
 *                  it), not only on records and the safety net.
 * @not_below:      sockets a round read (named by a record, or with a
 *                  mark it could not clear) that were at or above their
 *                  floor (nothing to restore).
 * @max_wait_ns:    the longest a record waited between its post (in the
 *                  kernel, at the cut) and the guard's thread reading it:
 *                  the scheduler's share of the event path, as
 *                  max_late_us of sockbuf_guard_totals is for passes.
 * @records_at:     records read per function that posted them, in the
 *                  order of the SOCKBUF_GUARD_EV_* bits without the
 *                  renames: [0] __sk_mem_raise_allocated(), [1]
 *                  tcp_check_space() or __tcp_check_space(), [2]
 *                  sk_page_frag_refill(), [3] tcp_stream_alloc_skb() or
 *                  sk_stream_alloc_skb(); 32-bit, wrapping.  Records
 *                  posted by sk_setsockopt() (an
 *                  outside socket-option write) count in @records only:
 *                  the struct has no room for a fifth.
 */
struct sockbuf_guard_event_totals {
	int err;
	unsigned int attached;
	unsigned int net_interval_us;
	int watch_err;
	uint64_t records;
	uint64_t lost;
	uint64_t rounds;
	uint64_t restored_events;
	uint64_t restored_passes;
	uint64_t dropped;
	uint64_t total_round_ns;
	uint64_t clear_failed;
	uint64_t not_below;
	uint64_t max_wait_ns;
	uint32_t records_at[4];
};

/**
 * sockbuf_guard_event_stats() - what the event source did.
 * @guard: the guard.
 * @out:   filled; err is -EPERM for a guard made without
 *         SOCKBUF_GUARD_EVENTS.
 *
 * A separate call rather than more fields in sockbuf_guard_totals, which
 * has no reserved word left.
 *
 * Return: 0, or -EBADF, -EINVAL (@out NULL).
 */
SOCKBUF_API int sockbuf_guard_event_stats(int guard, struct sockbuf_guard_event_totals *out);

/**
 * struct sockbuf_guard_daemon_totals - the hand-over to sockbufd(8).
 * @pid:       the sockbufd serving this guard's floors now; 0 while the
 *             guard serves them itself.
 * @err:       why the last look found no daemon to hand over to (0 when one
 *             serves): -ENOENT none runs (or the one named has exited),
 *             -EXDEV it serves another network namespace or reads another
 *             /dev/shm than this process publishes in, -EACCES it could not
 *             take this process's sockets (the process is not dumpable, or
 *             Yama's ptrace_scope is 3), -EINVAL its presence file is not
 *             in the daemon's format, -EPERM its
 *             presence file is not root's alone (or the guard was made with
 *             SOCKBUF_GUARD_NO_DAEMON), -ENOSPC a floor is not published
 *             (floor registry full or off: SOCKBUF_FLOOR_REGISTRY=0), -ECHILD
 *             a forked child's copy of a guard, -ESRCH no driver (neither
 *             sockbuf_guard_start() nor sockbuf_guard_timerfd(); also after
 *             sockbuf_guard_stop()), -ENOSYS no pidfd_open() (before Linux
 *             5.3), -ERANGE the daemon keeps some kind of cut less tightly
 *             than this guard would (a slower --interval, or events that
 *             leave setsockopt() cuts to its safety net where this guard's
 *             own programs watch them), -ETIMEDOUT it made
 *             no progress (stopped, hung, overloaded), -EAGAIN its progress
 *             file was caught mid-rewrite, or another -errno of reading the
 *             files or pidfd_open().
 * @handovers: times the guard stood down for a daemon.
 * @resumes:   times it took its sockets back (the daemon exited, stalled or
 *             no longer keeps the guard's bound, or a floor it added could
 *             not be published).
 * @served_ns: time served by a daemon so far, the current stretch included.
 */
struct sockbuf_guard_daemon_totals {
	int pid;
	int err;
	uint32_t handovers;
	uint32_t resumes;
	uint64_t served_ns;
};

/**
 * sockbuf_guard_daemon_stats() - whether sockbufd serves the guard's floors.
 * @guard: the guard.
 * @out:   filled.
 *
 * See SOCKBUF_GUARD_NO_DAEMON for when a guard hands over.
 *
 * Return: 0, or -EBADF, -EINVAL (@out NULL).
 */
SOCKBUF_API int sockbuf_guard_daemon_stats(int guard, struct sockbuf_guard_daemon_totals *out);

/**
 * sockbuf_guard_set_net_interval() - the safety net's interval.
 * @guard:       the guard.
 * @interval_us: between full passes while events drive the guard
 *               (SOCKBUF_GUARD_EVENTS), 100 to 600,000,000;
 *               SOCKBUF_GUARD_NET_DEFAULT_US (60,000,000) by default.  Takes effect at the next
 * sockbuf_guard_start() or sockbuf_guard_timerfd().
 *
 * Return: 0, or -EBADF, -EINVAL (out of range).
 */
SOCKBUF_API int sockbuf_guard_set_net_interval(int guard, unsigned int interval_us);

/* ------------------------------------------------------------------------
 * Names, for logs and reports.
 * ---------------------------------------------------------------------- */

/** sockbuf_strategy_name() - "unlock", "rcvlowat", ... or "?" if unknown. */
SOCKBUF_API const char *sockbuf_strategy_name(int strategy);

/** sockbuf_feature_name() - name of one SOCKBUF_FEAT_* bit, or "?". */
SOCKBUF_API const char *sockbuf_feature_name(uint32_t feature);

/**
 * sockbuf_clamp_names() - comma-separated names of SOCKBUF_CLAMP_* bits.
 * @clamps: the bits.
 * @buf, @len: where to write; always NUL-terminated when @len > 0.
 *
 * Return: the length the full text needs (like snprintf), or -EINVAL when
 * @buf is NULL and @len is not 0.
 */
SOCKBUF_API int sockbuf_clamp_names(uint32_t clamps, char *buf, unsigned int len);

/**
 * sockbuf_reserve_state_name() - short name of an enum sockbuf_reserve_state
 * value ("usable", "root-cgroup", ...), or "?" if unknown.
 */
SOCKBUF_API const char *sockbuf_reserve_state_name(int state);

/** sockbuf_version() - SOCKBUF_VERSION of the library that is loaded. */
SOCKBUF_API int sockbuf_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SOCKBUF_SOCKBUF_H */
