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

// How much SO_RESERVE_MEM keeps a send floor of @snd_floor and a receive
// floor of @rcv_floor: 2 x send floor + receive floor + one charge's worth
// (reserve_allowance), at most INT_MAX.  See exec.cc: reserve().
int reserve_amount(int snd_floor, int rcv_floor);

} // namespace sockbuf::exec
