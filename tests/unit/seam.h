// SPDX-License-Identifier: MIT
// Fault injection through impl/sys.h: make chosen socket-option calls fail
// with a chosen errno, and count calls.  One injector at a time (tests run
// single-threaded unless they say otherwise).
#pragma once

#include <sys/socket.h>

#include <vector>

namespace sockbuf::test
{

struct fault {
	bool set; // true: setsockopt, false: getsockopt
	int level;
	int name;
	int err;	// positive errno to return
	int skip = 0;	// let this many matching calls through first
	int times = -1; // fail this many times (-1: always)
};

class injector
{
public:
	injector();
	~injector();
	injector(const injector &) = delete;
	injector &operator=(const injector &) = delete;

	void add(const fault &f);
	int calls_get() const;
	int calls_set() const;
	// Every int value passed to setsockopt(@level, @name) while this
	// injector was active, in call order (failed and faked calls too).
	std::vector<int> values_set(int level, int name) const;
};

// A fresh probe (SOCKBUF_PROBE_FRESH) while an injector is active makes the
// cache describe the simulated kernel; this removes the hooks (ending every
// injection) and puts the real kernel's probe back.
void reprobe_real_kernel();

} // namespace sockbuf::test
