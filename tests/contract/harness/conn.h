// SPDX-License-Identifier: MIT
// Connections of a scenario: one listener per arm, set up the arm's way
// before listen(), clients set up before connect(), every socket recorded
// with what its setup call returned and what accept() carried over.
#pragma once

#include "model.h"

#include <functional>
#include <string>
#include <vector>

namespace sockbuf::contract
{

struct arm_sizes {
	int snd = 0, rcv = 0; // kernel unit (what getsockopt reads)
	bool force = false;   // may pass *mem_max (SO_*BUFFORCE, CAP_NET_ADMIN)
};

struct connection {
	arm a;
	size_t client, server; // indexes into connection_set::sockets
};

struct connection_set {
	std::vector<socket_record> sockets;
	std::vector<connection> conns;
	~connection_set();
	void close_all();
};

// Test hooks into connection setup: change a socket at a point where the
// kernel state it leaves is what a clause judges (the suite's own tests).
struct setup_hooks {
	// Right after the arm's setup call returned, before the suite reads
	// back what it left (what C1 judges).
	std::function<void(const socket_record &)> after_call;
	// After that read-back, before the handshake: a listener before
	// listen(), a client before connect() (inheritance C4, window scale C5).
	std::function<void(const socket_record &)> before_handshake;
};

// Sets up @fd the @a way.  Fills the setup fields of @rec.  0 or -errno.
int apply_arm(arm a, int fd, const arm_sizes &sz, socket_record *rec,
	      const setup_hooks &hooks = {});

// Opens one connection per entry of @arms (listener per distinct arm).
// 0, or -errno with @what naming the step.
int open_connections(const std::string &scenario, const std::vector<arm> &arms, const arm_sizes &sz,
		     connection_set *out, std::string *what, const setup_hooks &hooks = {});

// Quiescent comparison of getsockopt, inet_diag and sockbuf_get_state for
// every socket, into before or after.
void take_snapshots(connection_set *set, bool after);

// A socket's TCP_INFO window scales into the record.
void read_wscale(socket_record *rec);

} // namespace sockbuf::contract
