// SPDX-License-Identifier: MIT
// KTAP v1 (Documentation/dev-tools/ktap.rst): a version line and plan, each
// scenario a nested test (two spaces deeper) ending in its own result line,
// then kselftest's closing "# Totals:" line, which here counts the
// clause x arm subtests.
#include "report_ci.h"

#include <fmt/core.h>

namespace sockbuf::contract
{

namespace
{

std::string result_line(const std::string &indent, size_t n, const ci_case &c)
{
	switch (c.result) {
	case ci_result::pass:
		return fmt::format("{}ok {} {}\n", indent, n, c.name);
	case ci_result::fail:
		return fmt::format("{}not ok {} {}\n", indent, n, c.name);
	case ci_result::xfail:
		return fmt::format("{}ok {} {} # XFAIL {}\n", indent, n, c.name, c.reason);
	case ci_result::skip:
		return fmt::format("{}ok {} {} # SKIP {}\n", indent, n, c.name, c.reason);
	}
	return "";
}

std::string suite_lines(const ci_suite &s, size_t n)
{
	std::string out = fmt::format("  KTAP version 1\n  1..{}\n", s.cases.size());
	for (size_t i = 0; i < s.cases.size(); i++) {
		const ci_case &c = s.cases[i];
		// Diagnostics go right before the result line they explain.
		if (c.result == ci_result::fail) {
			out += fmt::format("  # {}: {}\n", c.name, c.reason);
			if (!c.first_violation.empty())
				out += fmt::format("  # {}: first violation: {}\n", c.name,
						   c.first_violation);
		} else if (c.result == ci_result::xfail &&
			   c.first_violation.find("kernel events:") != std::string::npos) {
			// A raw C3 finding: which kernel event made it.
			out +=
			    fmt::format("  # {}: first violation: {}\n", c.name, c.first_violation);
		}
		out += result_line("  ", i + 1, c);
	}
	if (s.failed())
		return out + fmt::format("not ok {} {}\n", n, s.name);
	if (!s.skip_reason.empty())
		return out + fmt::format("ok {} {} # SKIP {}\n", n, s.name, s.skip_reason);
	if (s.all_skipped())
		return out + fmt::format("ok {} {} # SKIP every clause skipped\n", n, s.name);
	return out + fmt::format("ok {} {}\n", n, s.name);
}

} // namespace

std::string ktap_report(const json &doc, const ci_options &opt)
{
	auto suites = ci_suites(doc, opt);
	std::string out = fmt::format("KTAP version 1\n# sockbuf-contract {} on Linux {} ({} "
				      "profile)\n1..{}\n",
				      text_of(doc["library_version"]),
				      doc["kernel"]["release"].get<std::string>(),
				      doc["profile"].get<std::string>(), suites.size());
	for (size_t i = 0; i < suites.size(); i++)
		out += suite_lines(suites[i], i + 1);
	ci_counts n = count_cases(suites);
	out += fmt::format("# Totals: pass:{} fail:{} xfail:{} xpass:0 skip:{} error:0\n", n.pass,
			   n.fail, n.xfail, n.skip);
	return out;
}

} // namespace sockbuf::contract
