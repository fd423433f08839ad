// SPDX-License-Identifier: MIT
// The sampler's cycle plan: sockets with a time-bounded verdict (the floor
// guard's arms) are read on every cycle, the others in turns; a plan that
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
	// 300 sockets with a time-bounded verdict, 900 others: each cycle
	// reads the 300 and a slice of a third as many (100), so a cycle
	// grows by a third and every other socket is read once in 9 cycles.
	auto every = range(0, 300), turns = range(300, 900);
	size_t pos = 0;
	std::map<size_t, int> seen;
	for (int c = 0; c < 9; c++) {
		auto plan = cycle_plan(every, turns, &pos);
		ASSERT_EQ(plan.size(), 400u) << "the bounded set plus a third as many";
		std::set<size_t> in(plan.begin(), plan.end());
		for (size_t i : every)
			EXPECT_TRUE(in.count(i))
			    << "bounded socket " << i << " skipped in cycle " << c;
		for (size_t i : plan)
			if (i >= 300)
				seen[i]++;
	}
	ASSERT_EQ(seen.size(), 900u) << "a round of 9 cycles reads every other socket";
	for (const auto &[i, n] : seen)
		EXPECT_EQ(n, 1) << "socket " << i;
}

TEST(SamplerPlan, BothGuardedArmsHaveATimeBound)
{
	// Reserve mode is judged by its guard's bound like the guarded arm
	// (c3_floor.cc): its sockets must not wait for their turn.
	EXPECT_TRUE(time_bounded(arm::lib_initial));
	EXPECT_TRUE(time_bounded(arm::lib_reserve));
	for (arm a : {arm::untouched, arm::raw_unlock, arm::raw_locked, arm::lib_locked})
		EXPECT_FALSE(time_bounded(a)) << arm_name(a);

	// The sampler's own split: both guarded arms every cycle, the rest
	// in turns, listeners and sockets without an fd not at all.
	std::vector<socket_record> sockets(7);
	const arm arms[] = {arm::lib_initial, arm::lib_reserve, arm::raw_unlock, arm::untouched,
			    arm::lib_locked,  arm::lib_reserve, arm::lib_initial};
	for (size_t i = 0; i < sockets.size(); i++) {
		sockets[i].a = arms[i];
		sockets[i].fd = int(10 + i);
	}
	sockets[5].r = role::listener;
	sockets[6].fd = -1;
	std::vector<size_t> every, turns;
	split_for_cycles(sockets, &every, &turns);
	EXPECT_EQ(every, (std::vector<size_t>{0, 1}));
	EXPECT_EQ(turns, (std::vector<size_t>{2, 3, 4}));
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
