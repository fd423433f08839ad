// SPDX-License-Identifier: MIT
// The plan of which strategy sets each buffer, and its execution.
#include "exec.h"

#include "buffer.h"
#include "fd_serial.h"
#include "strategy.h"
#include "sys.h"
#include "validate.h"
#include "window_clamp.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace sockbuf::exec
{

namespace
{

// Which strategy keeps autotuning on for direction i on this kernel, or
// the fallback the caller chose, or -EOPNOTSUPP.
int choose_initial(const op &o, int i)
{
	if (o.has(SOCKBUF_FEAT_BUF_LOCK))
		return SOCKBUF_STRAT_UNLOCK;
	if (i == buffer::rcv && o.has(SOCKBUF_FEAT_RCVLOWAT_RAISE))
		return SOCKBUF_STRAT_RCVLOWAT;
	if (o.flags & SOCKBUF_F_FALLBACK_LOCK)
		return SOCKBUF_STRAT_LOCK;
	if (o.flags & SOCKBUF_F_FALLBACK_DEFAULT)
		return SOCKBUF_STRAT_DEFAULT;
	return -EOPNOTSUPP;
}

void note_tcp_state(op &o)
{
	int state = validate::tcp_state(o.fd);
	o.rep->tcp_state = state;
	if (state == TCP_LISTEN)
		o.rep->flags |= SOCKBUF_R_LISTENER;
	else if (state >= 0 && state != TCP_CLOSE)
		o.rep->flags |= SOCKBUF_R_AFTER_HANDSHAKE;
}

int apply_one(op &o, int i, int plan, int *unlock_bits)
{
	switch (plan) {
	case SOCKBUF_STRAT_UNLOCK:
		*unlock_bits |= buffer::dir_bit(i);
		return strategy::setbuf(o, i, true);
	case SOCKBUF_STRAT_RCVLOWAT:
		return strategy::rcvlowat(o);
	case SOCKBUF_STRAT_DEFAULT:
		return strategy::leave_default(o, i);
	case SOCKBUF_STRAT_HELD:
		// Autotuning already grew it past the request: keep the size,
		// and unlock it where the kernel can (it may have been locked).
		if (o.has(SOCKBUF_FEAT_BUF_LOCK))
			*unlock_bits |= buffer::dir_bit(i);
		o.dir(i).strategy = SOCKBUF_STRAT_HELD;
		o.dir(i).clamps |= SOCKBUF_CLAMP_ALREADY_LARGER;
		return 0;
	default: // SOCKBUF_STRAT_LOCK
		return strategy::setbuf(o, i, false);
	}
}

// SO_RESERVE_MEM sized so that moderation cannot cut the send buffer below
// its floor.  The reservation is one per socket, shared by both queues
// (sk_unused_reserved_mem() is reserved - wmem_queued - rmem_alloc), and
// sk_stream_moderate_sndbuf() keeps max(min(sndbuf, queued / 2), unused).
// Moderation runs only when a charge fails (__sk_mem_raise_allocated()'s
// suppress_allocation, tcp_stream_alloc_skb()), and a charge of size c
// fails only once the forward allocation, never below the unused
// reservation, is short of c: queued > reserved - rmem_alloc - c.  The
// send buffer is then cut to about queued / 2 > (reserved - rmem_alloc -
// c) / 2.  With reserved = 2 x send floor + receive floor + allowance,
// a receive queue within its floor and c within the allowance, that is at
// least the send floor.  A reservation of send + receive floor only (the
// library's earlier amount) let 6.12 and 7.2 cut a 128 KiB floor to 114 KiB
// under a memcg limit.  SO_RESERVE_MEM replaces the previous amount:
// restore passes the full floor, not just what it raised.
//
// No syscall is made where the answer is known: a kernel without the option
// (-ENOPROTOOPT), a process the probe found unable to use it (-EOPNOTSUPP,
// as the kernel says without memcg socket accounting), or a listening socket
// (-EINVAL): sockets it accepts do not inherit a reservation, so one on the
// listener would only hold memory for a socket that never sends.
int reserve_refusal(const op &o)
{
	if (!(o.facts.known & SOCKBUF_FEAT_RESERVE_MEM))
		return -ENOPROTOOPT;
	if (!o.has(SOCKBUF_FEAT_RESERVE_MEM))
		return -EOPNOTSUPP;
	if (o.rep->flags & SOCKBUF_R_LISTENER)
		return -EINVAL;
	return 0;
}

void reserve(op &o)
{
	int bytes =
	    o.reserve_bytes ? o.reserve_bytes : reserve_amount(o.rep->snd.floor, o.rep->rcv.floor);
	int ret = reserve_refusal(o);
	if (ret == 0)
		ret = sys::set_int(o.fd, SOL_SOCKET, SO_RESERVE_MEM, bytes);
	if (ret == 0) {
		o.rep->flags |= SOCKBUF_R_RESERVED;
	} else {
		o.rep->flags |= SOCKBUF_R_RESERVE_FAILED;
		o.rep->reserve_err = ret;
	}
}

// A connected socket whose buffer autotuning (or anything else) has already
// grown to the request or past it: an initial size is a starting point, so
// the buffer is not lowered to it.  Plans SOCKBUF_STRAT_HELD for it.
int hold_grown(op &o, int plan[2])
{
	for (int i = 0; i < 2; i++) {
		if (plan[i] == SOCKBUF_STRAT_NONE)
			continue;
		int now = 0;
		int ret = buffer::get_size(o.fd, i, &now);
		if (ret < 0)
			return ret;
		if (now >= (o.size[i] & ~1)) {
			plan[i] = SOCKBUF_STRAT_HELD;
			o.dir(i).effective = now;
		}
	}
	return 0;
}

// A size set with SO_*BUFFORCE and then unlocked is usually above
// net.core.[wr]mem_max and often above tcp_[wr]mem[2]: report what the
// kernel holds once the lock bit is clear, not what it held before.
int reread_forced(op &o)
{
	for (int i = 0; i < 2; i++) {
		struct sockbuf_dir_report &d = o.dir(i);
		if (d.strategy != SOCKBUF_STRAT_FORCE_UNLOCK || d.locked != 0)
			continue;
		int ret = buffer::get_size(o.fd, i, &d.effective);
		if (ret < 0)
			return ret;
	}
	return 0;
}

// After a failure part-way: read back what the socket now holds.
void read_back(op &o)
{
	o.rep->flags |= SOCKBUF_R_PARTIAL;
	for (int i = 0; i < 2; i++)
		if (o.size[i] > 0)
			buffer::get_size(o.fd, i, &o.dir(i).effective);
	int bits = 0;
	if (o.has(SOCKBUF_FEAT_BUF_LOCK) && buffer::get_lock(o.fd, &bits) == 0)
		for (int i = 0; i < 2; i++)
			o.dir(i).locked = (bits & buffer::dir_bit(i)) ? 1 : 0;
}

} // namespace

void clear_report(struct sockbuf_report *rep)
{
	std::memset(rep, 0, sizeof(*rep));
	rep->tcp_state = -1;
	rep->snd.locked = rep->rcv.locked = -1;
}

int reserve_amount(int snd_floor, int rcv_floor)
{
	// One charge: a page fragment of copied data (32 KiB) or an skb's
	// truesize; 64 KiB covers a linear skb of a 64 KiB GSO segment too.
	constexpr int64_t reserve_allowance = 64 << 10;
	int64_t bytes = 2 * int64_t(snd_floor) + int64_t(rcv_floor);
	if (snd_floor > 0)
		bytes += reserve_allowance;
	return int(std::min<int64_t>(bytes, INT_MAX));
}

int reserve_only(op &o, int bytes)
{
	clear_report(o.rep);
	o.reserve_bytes = bytes;
	fd_serial::guard serial(o.serial_fd());
	if (o.protocol == IPPROTO_TCP && o.has(SOCKBUF_FEAT_TCP_INFO))
		note_tcp_state(o);
	int ret = validate::tcp_type(o.fd, o.rep->tcp_state);
	if (ret < 0)
		return ret; // nothing reserved
	reserve(o);
	return 0;
}

namespace
{

// Carries out @plan (set, unlock, undo a window clamp the set left, record
// the floor, reserve) on a socket whose state the caller has noted.
int carry_out(op &o, mode m, const int plan[2])
{
	if (m == mode::initial && (plan[0] == SOCKBUF_STRAT_LOCK || plan[1] == SOCKBUF_STRAT_LOCK))
		o.rep->flags |= SOCKBUF_R_FALLBACK;

	// Kernels whose SO_RCVBUF leaves a window clamp: note the clamp before,
	// so that one the unlock recipe adds can be taken away after.
	const bool clamp_watch = plan[buffer::rcv] == SOCKBUF_STRAT_UNLOCK &&
				 (o.facts.quirks & SOCKBUF_QUIRK_RCVBUF_CLAMPS_WINDOW);
	int clamp_before = 0;
	int ret = clamp_watch ? window_clamp::read(o.fd, &clamp_before) : 0;
	if (ret < 0)
		return ret; // nothing changed yet

	int unlock_bits = 0;
	for (int i = 0; i < 2 && ret == 0; i++)
		if (plan[i] != SOCKBUF_STRAT_NONE)
			ret = apply_one(o, i, plan[i], &unlock_bits);
	if (ret == 0 && unlock_bits)
		ret = strategy::clear_locks(o, unlock_bits);
	if (ret == 0 && unlock_bits)
		ret = reread_forced(o);
	if (ret == 0 && clamp_watch)
		ret = window_clamp::undo(o, clamp_before);
	if (ret < 0) {
		if (o.changed)
			read_back(o);
		return ret;
	}

	const int64_t tcp_max[2] = {o.facts.tcp_wmem_max, o.facts.tcp_rmem_max};
	for (int i = 0; i < 2; i++) {
		struct sockbuf_dir_report &d = o.dir(i);
		if (plan[i] == SOCKBUF_STRAT_NONE)
			continue;
		// A direction left at the kernel's size (FALLBACK_DEFAULT) has no
		// floor: nothing was set, and nothing can be restored there
		// without locking it (5.10's send side under tcp_mem pressure
		// went to 4608 with the kernel's 16384 taken as a floor).
		if (m == mode::initial && plan[i] != SOCKBUF_STRAT_DEFAULT)
			d.floor = std::min(d.requested, d.effective);
		if (d.locked == 0 && tcp_max[i] > 0 && d.effective > tcp_max[i])
			d.clamps |= SOCKBUF_CLAMP_TCP_MEM_MAX;
	}
	if (m == mode::initial && (o.flags & SOCKBUF_F_RESERVE_MEM))
		reserve(o);
	return 0;
}

} // namespace

int run(op &o, mode m)
{
	clear_report(o.rep);

	int plan[2] = {SOCKBUF_STRAT_NONE, SOCKBUF_STRAT_NONE};
	for (int i = 0; i < 2; i++) {
		if (o.size[i] == 0)
			continue;
		plan[i] = m == mode::lock ? SOCKBUF_STRAT_LOCK : choose_initial(o, i);
		if (plan[i] < 0) {
			// Nothing changed yet; a socket that is not TCP is
			// told so first, as before the kernel was asked.
			int ret = validate::tcp_type(o.fd, -1);
			return ret < 0 ? ret : plan[i];
		}
		o.dir(i).requested = o.size[i];
	}

	// From here on the socket is read and changed: one call per fd at a
	// time (the lock bits are one value; see fd_serial.h).
	fd_serial::guard serial(o.serial_fd());
	if (o.protocol == IPPROTO_TCP && o.has(SOCKBUF_FEAT_TCP_INFO))
		note_tcp_state(o);
	// set_initial and restore are for TCP only; a raw socket of protocol
	// TCP is not (TCP_INFO did not answer: SO_TYPE tells).  lock takes
	// any socket, and one whose TCP_INFO did not answer gets no TCP state.
	int ret = m == mode::initial ? validate::tcp_type(o.fd, o.rep->tcp_state) : 0;
	if (ret < 0)
		return ret; // nothing changed yet
	if (m == mode::initial && (o.rep->flags & SOCKBUF_R_AFTER_HANDSHAKE))
		ret = hold_grown(o, plan);
	if (ret < 0)
		return ret; // nothing changed yet
	return carry_out(o, m, plan);
}

int restore(op &o)
{
	clear_report(o.rep);
	int plan[2] = {SOCKBUF_STRAT_NONE, SOCKBUF_STRAT_NONE};
	for (int i = 0; i < 2; i++) {
		if (o.size[i] == 0)
			continue;
		plan[i] = choose_initial(o, i);
		if (plan[i] < 0)
			return plan[i]; // nothing changed yet
		o.dir(i).requested = o.size[i];
	}
	fd_serial::guard serial(o.serial_fd());
	// The state is read only where the reservation needs it (a listener
	// gets none); the raise itself does not depend on it.
	if ((o.flags & SOCKBUF_F_RESERVE_MEM) && o.has(SOCKBUF_FEAT_TCP_INFO))
		note_tcp_state(o);
	return carry_out(o, mode::initial, plan);
}

} // namespace sockbuf::exec
