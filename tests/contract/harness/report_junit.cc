// SPDX-License-Identifier: MIT
// JUnit XML in the shape GitLab, Jenkins and GitHub reporters accept:
// <testsuites> with a <testsuite> per scenario and a <testcase> per clause
// and arm.  JUnit has no expected failure: a raw property that does not
// hold (without --strict-raw) is a <skipped> whose message starts "XFAIL".
#include "report_ci.h"

#include <fmt/core.h>

namespace sockbuf::contract
{

namespace
{

// Escaped for attribute values and text; characters XML 1.0 forbids
// (control characters other than tab and newline) are dropped.
std::string xml(const std::string &s)
{
	std::string out;
	out.reserve(s.size());
	for (char ch : s) {
		switch (ch) {
		case '&':
			out += "&amp;";
			break;
		case '<':
			out += "&lt;";
			break;
		case '>':
			out += "&gt;";
			break;
		case '"':
			out += "&quot;";
			break;
		case '\'':
			out += "&apos;";
			break;
		default:
			if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\t' || ch == '\n')
				out += ch;
		}
	}
	return out;
}

std::string testcase(const std::string &suite, const ci_case &c)
{
	std::string open = fmt::format(
	    "    <testcase classname=\"sockbuf-contract.{}\" name=\"{}\"", xml(suite), xml(c.name));
	switch (c.result) {
	case ci_result::pass:
		return open + "/>\n";
	case ci_result::fail: {
		std::string text = c.reason;
		if (!c.first_violation.empty())
			text += "\nfirst violation: " + c.first_violation;
		return open +
		       fmt::format(">\n      <failure message=\"{}\" type=\"FAIL\">{}</failure>\n"
				   "    </testcase>\n",
				   xml(c.reason), xml(text));
	}
	case ci_result::xfail:
		return open + fmt::format(">\n      <skipped message=\"XFAIL raw kernel: {}\"/>\n"
					  "    </testcase>\n",
					  xml(c.reason));
	case ci_result::skip:
		return open + fmt::format(">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
					  xml(c.reason));
	}
	return "";
}

} // namespace

std::string junit_report(const json &doc, const ci_options &opt)
{
	auto suites = ci_suites(doc, opt);
	ci_counts all = count_cases(suites);
	std::string kernel = doc["kernel"]["release"].get<std::string>();
	std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
	out += fmt::format("<testsuites name=\"sockbuf-contract\" tests=\"{}\" failures=\"{}\" "
			   "errors=\"0\" skipped=\"{}\" time=\"{:.3f}\">\n",
			   all.total(), all.fail, all.skip + all.xfail, doc.value("seconds", 0.0));
	for (const auto &s : suites) {
		ci_counts n = count_cases({s});
		out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" "
				   "errors=\"0\" skipped=\"{}\" time=\"{:.3f}\">\n",
				   xml(s.name), n.total(), n.fail, n.skip + n.xfail, s.seconds);
		out += "    <properties>\n";
		out += fmt::format("      <property name=\"kernel\" value=\"{}\"/>\n", xml(kernel));
		out += fmt::format("      <property name=\"profile\" value=\"{}\"/>\n",
				   xml(doc["profile"].get<std::string>()));
		out += fmt::format("      <property name=\"library_version\" value=\"{}\"/>\n",
				   xml(text_of(doc["library_version"])));
		if (!s.skip_reason.empty())
			out += fmt::format("      <property name=\"skip_reason\" value=\"{}\"/>\n",
					   xml(s.skip_reason));
		out += "    </properties>\n";
		for (const auto &c : s.cases)
			out += testcase(s.name, c);
		out += "  </testsuite>\n";
	}
	return out + "</testsuites>\n";
}

} // namespace sockbuf::contract
