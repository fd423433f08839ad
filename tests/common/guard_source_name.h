// SPDX-License-Identifier: MIT
// A floor guard's size source (SOCKBUF_GUARD_SRC_*) by name, as the unit
// tests name their parameterised cases and the contract suite's reports
// name a guard's last pass: one spelling for both.
#pragma once

#include <sockbuf/sockbuf.h>

namespace sockbuf::test
{

// "getsockopt", "inet_diag", "io_uring" or "bpf"; @other for any other
// value (no pass yet, or no source forced).
inline const char *guard_source_name(int src, const char *other)
{
	switch (src) {
	case SOCKBUF_GUARD_SRC_GETSOCKOPT:
		return "getsockopt";
	case SOCKBUF_GUARD_SRC_DIAG:
		return "inet_diag";
	case SOCKBUF_GUARD_SRC_URING:
		return "io_uring";
	case SOCKBUF_GUARD_SRC_BPF:
		return "bpf";
	default:
		return other;
	}
}

} // namespace sockbuf::test
