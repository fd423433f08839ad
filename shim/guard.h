// SPDX-License-Identifier: MIT
// The floor guard inside a preloaded program (configuration item
// `guard:MS`, off by default): one thread that keeps the library's floor
// guard (sockbuf_guard_*) in step with the sockets the shim gave an
// initial size, and runs its passes.  The interposed calls only record
// floors in the fd table, as before: registering happens on this thread,
// where allocating and locking are allowed.  The thread waits on the
// guard's timerfd (sockbuf_guard_timerfd()): the polling timer, or with
// events on the ring buffer and the safety net's timer; it brings the
// membership in line at least every interval.
#pragma once

namespace sockbuf::shim
{

// Starts the thread (once, at load) with a guard made with @flags
// (SOCKBUF_GUARD_EVENTS, SOCKBUF_GUARD_BPF: configuration items
// guard_events and guard_bpf).  Returns false when it could not be
// started; the shim then works on without it.
bool start_floor_guard(int interval_ms, unsigned int flags);

} // namespace sockbuf::shim
