// SPDX-License-Identifier: MIT
// Plans which strategy sets each buffer and carries the plan out.  Callers
// have validated arguments and the socket; nothing here prints.
#pragma once

#include "op.h"

namespace sockbuf::exec
{

enum class mode {
	initial, // keep autotuning: unlock, rcvlowat, or a chosen fallback
	lock,	 // fixed size
};

// Fills *o.rep from scratch.  Returns 0 or -errno; -EOPNOTSUPP (initial
// mode, no mechanism, no fallback) is returned before anything changes.
int run(op &o, mode m);

// The floor guard's restore: raise each direction with a size in o.size
// (the floor, for a direction its pass found below it) as set_initial
// would, from what the pass already read.  Neither the socket's state nor
// its sizes are read again (the state only with SOCKBUF_F_RESERVE_MEM, for
// the reservation's listener rule), and nothing is validated: the caller
// has checked, right before, that the fd still names the socket it
// guards.  Fills *o.rep from scratch; 0 or -errno.
int restore(op &o);

// A report that says nothing happened: zeros, tcp_state and the lock
// states unknown (-1).
void clear_report(struct sockbuf_report *rep);

// How much SO_RESERVE_MEM keeps a send floor of @snd_floor and a receive
// floor of @rcv_floor: 2 x send floor + receive floor + one charge's worth
// (reserve_allowance), at most INT_MAX.  See exec.cc: reserve().
int reserve_amount(int snd_floor, int rcv_floor);

// The SO_RESERVE_MEM step alone, of @bytes, for a socket whose buffers are
// left as they are (sockbuf_restore_floor() with nothing below the floor,
// sockbuf_guard_add()).  Fills *o.rep from scratch: tcp_state, the listener
// and handshake flags, and SOCKBUF_R_RESERVED or SOCKBUF_R_RESERVE_FAILED
// with reserve_err, refused without a syscall as set_initial refuses.
// 0, or the -EPROTOTYPE (nothing reserved) of validate::tcp_type() for a
// socket of protocol TCP that is not TCP (a raw socket).
int reserve_only(op &o, int bytes);

} // namespace sockbuf::exec
