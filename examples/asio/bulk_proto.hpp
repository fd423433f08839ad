// SPDX-License-Identifier: MIT
// The Asio example's protocol, the BULK program of examples/tirpc/bulk.x
// in plain binary: a call is two big-endian words (op, argument); READ's
// reply is a length word and that many pattern bytes, STAT's and CUT's
// seven words (struct stat_reply).
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>

namespace bulk
{

enum op : uint32_t { op_read = 1, op_stat = 2, op_cut = 3 };

constexpr uint32_t max_read = 16u << 20;

struct stat_reply {
	int32_t sndbuf, rcvbuf, buf_lock, rcv_wscale;
	int32_t guard_restored, guard_max_late_us, guard_interval_us;
};
static_assert(sizeof(stat_reply) == 28);

inline char pattern(uint32_t i)
{
	return char(i * 131u >> 3);
}

// Words to and from network order, in place.
inline void to_net(uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		w[i] = htonl(w[i]);
}
inline void from_net(uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		w[i] = ntohl(w[i]);
}

} // namespace bulk
