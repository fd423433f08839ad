// SPDX-License-Identifier: MIT
// The kernel function behind each SOCKBUF_GUARD_EV_* bit of
// sockbuf_guard_event_totals.attached: one table for `sockbuf probe` and
// the tests that print what a kernel attached.
#pragma once

#include <sockbuf/sockbuf.h>

#include <string>

namespace sockbuf::guard_events
{

struct attach_name {
	unsigned int bit;
	const char *function;
};

inline constexpr attach_name attach_names[] = {
    {SOCKBUF_GUARD_EV_MEM_RAISE, "__sk_mem_raise_allocated"},
    {SOCKBUF_GUARD_EV_CHECK_SPACE, "tcp_check_space"},
    {SOCKBUF_GUARD_EV_DUNDER_CHECK_SPACE, "__tcp_check_space"},
    {SOCKBUF_GUARD_EV_FRAG_REFILL, "sk_page_frag_refill"},
    {SOCKBUF_GUARD_EV_ALLOC_SKB, "tcp_stream_alloc_skb"},
    {SOCKBUF_GUARD_EV_SK_STREAM_ALLOC_SKB, "sk_stream_alloc_skb"},
    {SOCKBUF_GUARD_EV_SK_SETSOCKOPT, "sk_setsockopt"},
};

// The functions of the bits set in @attached, in the table's order,
// joined by @sep ("" for none).
inline std::string attached_functions(unsigned int attached, const char *sep)
{
	std::string out;
	for (const auto &n : attach_names)
		if (attached & n.bit) {
			if (!out.empty())
				out += sep;
			out += n.function;
		}
	return out;
}

} // namespace sockbuf::guard_events
