// SPDX-License-Identifier: MIT
#include "dips.h"

#include <algorithm>
#include <cmath>

namespace sockbuf::contract
{

int64_t nearest_rank(const std::vector<int64_t> &sorted, double q)
{
	// Rank ceil(q * n), 1-based; the small epsilon keeps 0.5 * 4 at rank
	// 2 where floating point makes it 2.0000000000000004.
	auto rank = size_t(std::ceil(q * double(sorted.size()) - 1e-9));
	rank = std::clamp<size_t>(rank, 1, sorted.size());
	return sorted[rank - 1];
}

dip_summary summarize_dips(std::vector<int64_t> lengths_us)
{
	dip_summary d;
	d.count = lengths_us.size();
	if (lengths_us.empty())
		return d;
	std::sort(lengths_us.begin(), lengths_us.end());
	d.p50_us = nearest_rank(lengths_us, 0.50);
	d.p99_us = nearest_rank(lengths_us, 0.99);
	d.max_us = lengths_us.back();
	return d;
}

dip_summary dips_of(const scenario_result &r, arm a, std::optional<guard_driver> driver,
		    std::optional<bool> reserved)
{
	std::vector<int64_t> us;
	uint64_t dropped = 0;
	for (const auto &s : r.sockets) {
		if (s.a != a || s.r == role::listener || (driver && s.driver != *driver) ||
		    (reserved && bool(s.reserved) != *reserved))
			continue;
		for (const dip_log *l : {&s.snd_dips, &s.rcv_dips}) {
			for (const auto &d : l->dips)
				us.push_back(d.seen_us());
			dropped += l->dropped;
		}
	}
	dip_summary d = summarize_dips(std::move(us));
	d.dropped = dropped;
	return d;
}

} // namespace sockbuf::contract
