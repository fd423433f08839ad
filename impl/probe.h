// SPDX-License-Identifier: MIT
// What this kernel offers, found with real sockets once per process.
#pragma once

#include <sockbuf/sockbuf.h>

#include <cstdint>

namespace sockbuf::probe
{

// The few facts the hot paths need, read without a lock.
struct facts {
	uint32_t features;
	uint32_t known;	  // SOCKBUF_FEAT_* the kernel recognises
	uint32_t quirks;  // SOCKBUF_QUIRK_*
	int tcp_wmem_max; // tcp_wmem[2], -1 unknown
	int tcp_rmem_max; // tcp_rmem[2], -1 unknown
};

// Fills the cache on first use (thread-safe) and copies its facts to *out.
// Returns 0, or the -errno of a first probe that could not run (no facts
// are guessed: the caller fails with that error, and the next call retries).
int cached(facts *out);

// Copies the whole cached probe; fresh=true probes again first.
int get(struct sockbuf_probe_info *out, bool fresh);

#ifdef SOCKBUF_TEST_SEAM
// Empties the cache, as in a process that has not probed yet.
void reset_for_tests();
#endif

} // namespace sockbuf::probe
