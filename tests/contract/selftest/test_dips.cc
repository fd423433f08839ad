// SPDX-License-Identifier: MIT
// Dips under the floor, from fake samples: their lengths per buffer over
// both sources, and the per-scenario percentiles.
#include "dips.h"

#include <gtest/gtest.h>

#include <numeric>

namespace sockbuf::contract
{
namespace
{

TEST(Dips, NearestRankPercentiles)
{
	std::vector<int64_t> v(100);
	std::iota(v.begin(), v.end(), 1); // 1..100
	EXPECT_EQ(nearest_rank(v, 0.50), 50);
	EXPECT_EQ(nearest_rank(v, 0.99), 99);
	EXPECT_EQ(nearest_rank(v, 1.0), 100);
	EXPECT_EQ(nearest_rank({1, 2, 3, 4}, 0.50), 2);
	EXPECT_EQ(nearest_rank({1, 2, 3, 4}, 0.99), 4);
	EXPECT_EQ(nearest_rank({7}, 0.50), 7);
	EXPECT_EQ(nearest_rank({7}, 0.99), 7);

	// In any order; a long tail shows in p99 and max, not in p50.
	std::vector<int64_t> us(200, 1000);
	us[17] = 90'000;
	us[150] = 40'000;
	us[3] = 30'000;
	dip_summary d = summarize_dips(us);
	EXPECT_EQ(d.count, 200u);
	EXPECT_EQ(d.p50_us, 1000);
	EXPECT_EQ(d.p99_us, 30'000); // rank 198 of 200: the third longest
	EXPECT_EQ(d.max_us, 90'000);

	dip_summary none = summarize_dips({});
	EXPECT_EQ(none.count, 0u);
	EXPECT_EQ(none.p50_us, 0);
	EXPECT_EQ(none.p99_us, 0);
	EXPECT_EQ(none.max_us, 0);
}

TEST(Dips, OneDipPerBufferOverBothSources)
{
	dip_log l;
	// Cycle 10: both sources under; cycle 20: getsockopt reads it back
	// at the floor but inet_diag under, in either order: the dip goes on.
	l.note(10, true);
	l.note(10, true);
	l.note(20, false);
	l.note(20, true);
	l.note(30, true);
	l.note(30, false);
	// Cycle 40: both at the floor; cycle 50 under again: a second dip.
	l.note(40, false);
	l.note(40, false);
	l.note(50, true);
	l.note(60, false);
	l.note(70, true);
	l.end();
	ASSERT_EQ(l.dips.size(), 3u);
	EXPECT_EQ(l.dips[0].first_us, 10);
	EXPECT_EQ(l.dips[0].us(), 20) << "first to last sample under the floor";
	EXPECT_EQ(l.dips[1].us(), 0) << "one sample under: a dip of no measurable length";
	EXPECT_EQ(l.dips[2].first_us, 70);
	EXPECT_EQ(l.longest().first_us, 10);
	EXPECT_EQ(l.longest().us(), 20);
}

} // namespace
} // namespace sockbuf::contract
