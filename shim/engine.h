// SPDX-License-Identifier: MIT
// What the interposed calls do.  Each handler makes the program's own call
// through real:: first or last, as the policy needs, and returns exactly
// what that call returned, with errno as that call left it: the shim may
// change a socket's lock bit and starting size, never a call's result.
//
// Nothing here allocates or takes a lock once load() has run: the
// configuration is read-only and the library's probe cache is filled.
#pragma once

#include "config.h"

#include <sys/socket.h>

namespace sockbuf::shim
{

// Read-only after load().
struct engine_state {
	bool active = false;
	bool socket_events = false; // listen/connect/accept need a look
	bool force_ok = false;	    // force:allow and CAP_NET_ADMIN (libcap-ng)
	int reserve_state = 0;	    // the probe's enum sockbuf_reserve_state
	config cfg;
};

// Installs @s (at load time, before any handler can see it active).
void engine_install(const engine_state &s);

// Publishes again the floors of every socket the per-fd table describes
// (the fork child's seed, fork_seed.h).  System calls and atomics only.
void republish_floors();

int on_setsockopt(int fd, int level, int name, const void *val, socklen_t len);
int on_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int on_listen(int fd, int backlog);
int on_connect(int fd, const struct sockaddr *addr, socklen_t len);
int on_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags, bool four);

} // namespace sockbuf::shim
