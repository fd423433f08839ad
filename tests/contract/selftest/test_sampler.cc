// SPDX-License-Identifier: MIT
// The sampler's cycle plan: sockets with a time-bounded verdict (the floor
// guard's arm) are read on every cycle, the others in turns; a plan that
// dropped a bounded socket from a cycle, or left another one out of a
// whole round, would hide a dip.
#include "sampler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

namespace sockbuf::contract
{
namespace
{

std::vector<size_t> range(size_t from, size_t n)
{
	std::vector<size_t> v(n);
	std::iota(v.begin(), v.end(), from);
	return v;
}

TEST(SamplerPlan, FewSocketsAreAllReadEveryCycle)
{
	auto every = range(0, 2), turns = range(2, 10), all = range(0, 12);
	size_t pos = 0;
	for (int c = 0; c < 3; c++) {
		auto plan = cycle_plan(every, turns, &pos);
		EXPECT_EQ(std::set<size_t>(plan.begin(), plan.end()),
			  std::set<size_t>(all.begin(), all.end()));
		EXPECT_EQ(plan.size(), 12u);
	}
}

TEST(SamplerPlan, BoundedSocketsEveryCycleOthersOncePerRound)
{
	// parallel's full profile: 200 guarded sockets, 1000 others.
	auto every = range(0, 200), turns = range(200, 1000);
	size_t pos = 0;
	std::map<size_t, int> seen;
	for (int c = 0; c < 5; c++) {
		auto plan = cycle_plan(every, turns, &pos);
		ASSERT_EQ(plan.size(), 400u) << "the bounded set plus a slice as large";
		std::set<size_t> in(plan.begin(), plan.end());
		for (size_t i : every)
			EXPECT_TRUE(in.count(i))
			    << "guarded socket " << i << " skipped in cycle " << c;
		for (size_t i : plan)
			if (i >= 200)
				seen[i]++;
	}
	ASSERT_EQ(seen.size(), 1000u) << "a round of 5 cycles reads every other socket";
	for (const auto &[i, n] : seen)
		EXPECT_EQ(n, 1) << "socket " << i;
}

TEST(SamplerPlan, WithoutBoundedSocketsSlicesOfSixteen)
{
	auto turns = range(0, 100);
	size_t pos = 0;
	std::map<size_t, int> seen;
	for (int c = 0; c < 7; c++) { // ceil(100 / 16)
		auto plan = cycle_plan({}, turns, &pos);
		EXPECT_EQ(plan.size(), 16u);
		for (size_t i : plan)
			seen[i]++;
	}
	EXPECT_EQ(seen.size(), 100u);
}

} // namespace
} // namespace sockbuf::contract
