// SPDX-License-Identifier: MIT
// A TCP connection over loopback with a bounded, verified bulk transfer,
// shared by `sockbuf demo` and the real-socket tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace sockbuf::lab
{

struct sample_range {
	int first = -1, min = -1, max = -1, last = -1;
	void add(int v);
};

struct transfer_result {
	int err = 0;		// 0, or the -errno that stopped the run
	std::string what;	// which step failed, when err != 0
	uint64_t bytes = 0;	// bytes received and verified
	bool corrupt = false;	// a byte arrived that was not the one sent
	bool timed_out = false; // the time bound ended the run
	double seconds = 0;
	sample_range server_rcvbuf; // accepted socket, sampled after each read
	sample_range client_sndbuf; // sampled by the sender after each send
	int server_lock = -1;	    // SO_BUF_LOCK of the accepted socket
	int server_rcv_wscale = -1; // window scale the server announced
	int client_rcv_wscale = -1;
};

// Called on the listening socket before listen(), and on the client
// socket before connect().  Returns 0 or -errno.
using setup_fn = std::function<int(int fd)>;

// Listens on 127.0.0.1 (or the given IPv4 address), connects, accepts,
// sends @bytes from client to server, verifies every byte, and stops after
// @bytes or @max_seconds, whichever comes first.
transfer_result bulk_transfer(uint64_t bytes, double max_seconds, const setup_fn &listener_setup,
			      const setup_fn &client_setup, const char *addr = "127.0.0.1");

} // namespace sockbuf::lab
