// SPDX-License-Identifier: MIT
// The ways of setting one buffer.  Each fills op.dir(i) with what it did
// (strategy, effective, clamps, locked) and returns 0 or -errno.
#pragma once

#include "op.h"

namespace sockbuf::strategy
{

// SO_SNDBUF/SO_RCVBUF, and SO_*BUFFORCE when the request was clamped by
// *mem_max and SOCKBUF_F_ALLOW_FORCE permits it.  Leaves the lock bit set;
// @unlocking only chooses the strategy name (lock or unlock) reported.
int setbuf(op &o, int i, bool unlocking);

// Clears the lock bits in @bits after setbuf(), keeping the others.
int clear_locks(op &o, int bits);

// Receive only: raise sk_rcvbuf through SO_RCVLOWAT, then restore the
// caller's low-water mark.
int rcvlowat(op &o);

// Fallback: record the kernel's size, untouched.
int leave_default(op &o, int i);

} // namespace sockbuf::strategy
