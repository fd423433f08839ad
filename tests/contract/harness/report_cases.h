// SPDX-License-Identifier: MIT
// The verdicts of a contract run as test cases a CI system counts: one
// suite per scenario, one case per clause and arm (raw, library; the
// integrity pseudo-clause once).  The KTAP and JUnit writers both read
// these, so the two formats always agree on names and counts.
#pragma once

#include "report.h"

#include <string>
#include <vector>

namespace sockbuf::contract
{

// What a case counts as.  xfail: a raw kernel property that does not hold,
// which the suite reports but does not fail on (unless --strict-raw): the
// raw arms show what the kernel does alone, the library is what must hold.
enum class ci_result : int { pass, fail, xfail, skip };

struct ci_case {
	std::string name; // "C3.library", "I"
	ci_result result = ci_result::skip;
	// One line: the verdict's why, with the outcome's name first when it is
	// not pass, FAIL or skip.
	std::string reason;
	std::string first_violation; // fail and xfail: the first violation, if any
};

struct ci_suite {
	std::string name;
	std::string skip_reason; // the scenario did not run
	double seconds = 0;
	std::vector<ci_case> cases;
	bool failed() const;
	bool all_skipped() const;
};

struct ci_counts {
	int pass = 0, fail = 0, xfail = 0, skip = 0;
	int total() const { return pass + fail + xfail + skip; }
	void add(ci_result r);
};

struct ci_options {
	bool strict_raw = false; // a raw FAIL is a failure, not an xfail
};

// The one place a verdict name becomes a CI result.  @binding: the verdict
// decides the exit status (library half, integrity, or raw with
// --strict-raw).  pass, FAIL and skip map to themselves (a FAIL that is not
// binding to xfail); any other outcome is reported as a skip whose reason
// starts with the outcome's name, so it is visible and never counted as a
// pass.
ci_result map_verdict(const std::string &verdict, bool binding, const std::string &why,
		      std::string *reason);

std::vector<ci_suite> ci_suites(const json &doc, const ci_options &opt);
ci_counts count_cases(const std::vector<ci_suite> &suites);

// A document field as text, whether it is stored as a string or a number.
std::string text_of(const json &v);

// Text safe for one KTAP line or an XML attribute: newlines and '#' go.
std::string one_line(const std::string &s);

} // namespace sockbuf::contract
