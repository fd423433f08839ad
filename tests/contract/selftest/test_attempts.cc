// SPDX-License-Identifier: MIT
// The second attempt for an unverified scenario: asked for only when a
// library verdict is unverified and none failed, the second attempt's
// verdicts stand, and the first attempt's stay in the result and the
// reports.  A rule that retried a FAIL, or dropped the first attempt,
// would let a run hide what it saw.
#include "attempts.h"
#include "report.h"

#include <gtest/gtest.h>

namespace sockbuf::contract
{
namespace
{

json half(const char *verdict, const char *why)
{
	return {{"verdict", verdict},
		{"why", why},
		{"violations_total", 0},
		{"violations", json::array()}};
}

json scenario(const char *name, const char *c3_lib, const char *c1_lib = "pass")
{
	json c3 = {{"clause", "C3"},
		   {"raw", half("pass", "none under")},
		   {"library", half(c3_lib, "samples up to 204 ms apart")}};
	if (std::string(c3_lib) == "unverified") {
		c3["library"]["max_gap_ms"] = 203.8;
		c3["library"]["bound_ms"] = 75.2;
	}
	json c1 = {{"clause", "C1"},
		   {"raw", half("pass", "in force")},
		   {"library", half(c1_lib, "in force")}};
	return {{"name", name},
		{"seconds", 12.5},
		{"sampler", {{"max_gap_ms", 203.8}, {"rate_hz", 900.0}}},
		{"verdicts", json::array({c1, c3})}};
}

TEST(SecondAttempt, OnlyForUnverifiedWithoutFailure)
{
	EXPECT_TRUE(wants_second_attempt(scenario("rr", "unverified")));
	EXPECT_FALSE(wants_second_attempt(scenario("rr", "pass")));
	EXPECT_FALSE(wants_second_attempt(scenario("rr", "FAIL")));
	// A FAIL in another clause stands: no second attempt.
	EXPECT_FALSE(wants_second_attempt(scenario("rr", "unverified", "FAIL")));
	// A raw FAIL is a kernel finding, not the library's: it does not
	// stop the second attempt.
	json s = scenario("rr", "unverified");
	s["verdicts"][1]["raw"]["verdict"] = "FAIL";
	EXPECT_TRUE(wants_second_attempt(s));
	// A scenario that never ran (no verdicts) is not run again.
	EXPECT_FALSE(wants_second_attempt(json{{"name", "rr"}, {"skip_reason", "no netns"}}));
}

TEST(SecondAttempt, SecondVerdictsStandFirstAreKept)
{
	json first = scenario("rr", "unverified");
	json again = scenario("rr", "FAIL");
	json merged = with_earlier_attempt(again, first);
	EXPECT_EQ(merged["verdicts"][1]["library"]["verdict"], "FAIL");
	ASSERT_EQ(merged["earlier_attempts"].size(), 1u);
	const json &e = merged["earlier_attempts"][0];
	EXPECT_EQ(e["verdicts"][1]["library"]["verdict"], "unverified");
	EXPECT_EQ(e["verdicts"][1]["library"]["max_gap_ms"], 203.8);
	EXPECT_EQ(e["verdicts"][1]["library"]["bound_ms"], 75.2);
	EXPECT_EQ(e["sampler"]["max_gap_ms"], 203.8);
	EXPECT_EQ(e["seconds"], 12.5);
}

TEST(SecondAttempt, RunsOnceMoreOnlyWhenUnverified)
{
	// The runner as the suite's main loop uses it: each attempt a fresh
	// run of the scenario.
	auto runs_of = [](std::vector<json> results, std::vector<int> *seen) {
		size_t at = 0;
		json out = run_with_second_attempt(
		    [&] { return results.at(at++); },
		    [&](const json &, int attempt) { seen->push_back(attempt); });
		return std::make_pair(out, at);
	};
	std::vector<int> seen;
	auto [once, n1] = runs_of({scenario("rr", "pass")}, &seen);
	EXPECT_EQ(n1, 1u);
	EXPECT_FALSE(once.contains("earlier_attempts"));
	seen.clear();
	auto [failed, n2] = runs_of({scenario("rr", "FAIL"), scenario("rr", "pass")}, &seen);
	EXPECT_EQ(n2, 1u); // a FAIL is never run again
	EXPECT_EQ(failed["verdicts"][1]["library"]["verdict"], "FAIL");
	seen.clear();
	auto [twice, n3] = runs_of({scenario("rr", "unverified"), scenario("rr", "pass")}, &seen);
	EXPECT_EQ(n3, 2u);
	EXPECT_EQ(seen, (std::vector<int>{1, 2}));
	EXPECT_EQ(twice["verdicts"][1]["library"]["verdict"], "pass");
	EXPECT_EQ(twice["earlier_attempts"][0]["verdicts"][1]["library"]["verdict"], "unverified");
	// Unverified twice: it stays unverified, and there is no third run.
	seen.clear();
	auto [still, n4] = runs_of(
	    {scenario("rr", "unverified"), scenario("rr", "unverified"), scenario("rr", "pass")},
	    &seen);
	EXPECT_EQ(n4, 2u);
	EXPECT_EQ(still["verdicts"][1]["library"]["verdict"], "unverified");
}

TEST(SecondAttempt, ReportsSayItRanTwice)
{
	EXPECT_EQ(earlier_attempt_text(scenario("rr", "pass")), "");
	json merged = with_earlier_attempt(scenario("rr", "pass"), scenario("rr", "unverified"));
	EXPECT_EQ(earlier_attempt_text(merged),
		  "rr: second attempt; the first C3 library unverified: samples up to 204 ms "
		  "apart");
	json doc = {{"kernel", {{"release", "9.9.0"}, {"version", "#1"}}},
		    {"profile", "quick"},
		    {"privileged", true},
		    {"scenarios", json::array({merged})}};
	std::string text = text_report(doc);
	EXPECT_NE(text.find("Run twice"), std::string::npos) << text;
	EXPECT_NE(text.find("rr: second attempt"), std::string::npos) << text;
}

} // namespace
} // namespace sockbuf::contract
