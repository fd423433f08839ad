// SPDX-License-Identifier: MIT
// Floors across fork(): a pre-fork server's workers hold the sockets the
// master sized, but the floor registry (impl/internal/floor_registry.h) is per
// process and a child starts with none, so `sockbuf show` would list the
// workers' copies with no floor.  The child handler republishes, into the
// child's own table, the floors of every inherited socket the shim's
// per-fd table still describes (same SO_COOKIE).  Only system calls and
// atomics, as in a signal handler; posix_spawn() and vfork() run no fork
// handlers and pay nothing.
#pragma once

namespace sockbuf::shim
{

// Registers the handler (pthread_atfork); false when it could not.
bool install_fork_seed();

} // namespace sockbuf::shim
