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

} // namespace sockbuf::exec
