// SPDX-License-Identifier: MIT
// Dips under the floor, summed up per scenario: how many, and how long a
// buffer stayed under its floor in each (first to last sample under it),
// as the median, the 99th percentile and the longest.
#pragma once

#include "model.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace sockbuf::contract
{

struct dip_summary {
	uint64_t count = 0;			    // dips (both directions of every socket)
	uint64_t dropped = 0;			    // dips past dip_log::cap, not in the figures
	int64_t p50_us = 0, p99_us = 0, max_us = 0; // 0 when count is 0
};

// The nearest-rank percentile @q (0 < q <= 1) of @sorted (ascending,
// non-empty): the smallest value that at least q of the values do not
// exceed, always one of the values.
int64_t nearest_rank(const std::vector<int64_t> &sorted, double q);

// Lengths in microseconds, in any order.
dip_summary summarize_dips(std::vector<int64_t> lengths_us);

// Every dip of the non-listener sockets of @a in @r (only those guarded by
// @driver, when given; only those whose SO_RESERVE_MEM was in force, or
// only those refused, when @reserved is given), both directions.
dip_summary dips_of(const scenario_result &r, arm a,
		    std::optional<guard_driver> driver = std::nullopt,
		    std::optional<bool> reserved = std::nullopt);

} // namespace sockbuf::contract
