// SPDX-License-Identifier: MIT
// One call's working state, passed down from the public entry points to the
// strategies.  Only the strategies and the executor touch the socket.
#pragma once

#include "probe.h"

#include <sockbuf/sockbuf.h>

namespace sockbuf
{

struct op {
	int fd;
	int protocol;	    // SO_PROTOCOL, read while validating
	int size[2];	    // requested sizes, index buffer::snd / buffer::rcv
	unsigned int flags; // SOCKBUF_F_*
	probe::facts facts;
	struct sockbuf_report *rep; // never null inside the library
	bool changed = false;	    // a setsockopt has succeeded
	int reserve_bytes = 0;	    // SO_RESERVE_MEM amount; 0: this call's floors
	// The program's number for the socket, where fd is a duplicate of it
	// (the guard's restore): calls serialise on it (fd_serial.h).
	int program_fd = -1;

	int serial_fd() const { return program_fd >= 0 ? program_fd : fd; }

	struct sockbuf_dir_report &dir(int i) const { return i == 0 ? rep->snd : rep->rcv; }
	bool has(uint32_t feature) const { return (facts.features & feature) != 0; }
};

} // namespace sockbuf
