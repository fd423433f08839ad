// SPDX-License-Identifier: MIT
#include "report_cases.h"

#include "attribution.h"

#include <fmt/core.h>

#include <algorithm>

namespace sockbuf::contract
{

namespace
{

// The outcomes the model names (model.h), and everything else.
enum class known_outcome { pass, fail, skip, other };

known_outcome classify(const std::string &verdict)
{
	if (verdict == outcome_name(outcome::pass))
		return known_outcome::pass;
	if (verdict == outcome_name(outcome::fail))
		return known_outcome::fail;
	if (verdict == outcome_name(outcome::skip))
		return known_outcome::skip;
	return known_outcome::other;
}

std::string first_violation(const json &half)
{
	if (!half.contains("violations") || half["violations"].empty())
		return "";
	const json &v = half["violations"][0];
	std::string events = kernel_events_text(v);
	return fmt::format("{} at {:.1f} ms: {} (value {}, expected {}){}",
			   v["socket"].get<std::string>(), v["t_ms"].get<double>(),
			   v["what"].get<std::string>(), v["value"].get<int64_t>(),
			   v["expected"].get<int64_t>(), events.empty() ? "" : "; " + events);
}

ci_case make_case(const std::string &name, const json &half, bool binding)
{
	ci_case c;
	c.name = name;
	c.result = map_verdict(half["verdict"].get<std::string>(), binding,
			       half["why"].get<std::string>(), &c.reason);
	if (c.result == ci_result::fail || c.result == ci_result::xfail)
		c.first_violation = one_line(first_violation(half));
	return c;
}

} // namespace

bool ci_suite::failed() const
{
	return std::any_of(cases.begin(), cases.end(),
			   [](const ci_case &c) { return c.result == ci_result::fail; });
}

bool ci_suite::all_skipped() const
{
	return std::all_of(cases.begin(), cases.end(),
			   [](const ci_case &c) { return c.result == ci_result::skip; });
}

void ci_counts::add(ci_result r)
{
	switch (r) {
	case ci_result::pass:
		pass++;
		break;
	case ci_result::fail:
		fail++;
		break;
	case ci_result::xfail:
		xfail++;
		break;
	case ci_result::skip:
		skip++;
		break;
	}
}

ci_result map_verdict(const std::string &verdict, bool binding, const std::string &why,
		      std::string *reason)
{
	*reason = one_line(why);
	switch (classify(verdict)) {
	case known_outcome::pass:
		return ci_result::pass;
	case known_outcome::fail:
		return binding ? ci_result::fail : ci_result::xfail;
	case known_outcome::skip:
		return ci_result::skip;
	case known_outcome::other:
		break;
	}
	// An outcome this writer does not know (such as "unverified"): neither
	// a pass nor a failure, so a skip that names it.
	*reason = one_line(verdict + ": " + why);
	return ci_result::skip;
}

std::vector<ci_suite> ci_suites(const json &doc, const ci_options &opt)
{
	std::vector<ci_suite> out;
	for (const auto &s : doc["scenarios"]) {
		ci_suite suite;
		suite.name = s["name"].get<std::string>();
		if (s.contains("skip_reason"))
			suite.skip_reason = one_line(s["skip_reason"].get<std::string>());
		suite.seconds = s.value("seconds", 0.0);
		for (const auto &v : s["verdicts"]) {
			std::string clause = v["clause"];
			// Integrity is one fact about the bytes, the same for both arms.
			if (clause == "I") {
				suite.cases.push_back(make_case(clause, v["library"], true));
				continue;
			}
			suite.cases.push_back(make_case(clause + ".raw", v["raw"], opt.strict_raw));
			suite.cases.push_back(make_case(clause + ".library", v["library"], true));
		}
		out.push_back(std::move(suite));
	}
	return out;
}

ci_counts count_cases(const std::vector<ci_suite> &suites)
{
	ci_counts n;
	for (const auto &s : suites)
		for (const auto &c : s.cases)
			n.add(c.result);
	return n;
}

std::string text_of(const json &v)
{
	return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string one_line(const std::string &s)
{
	std::string out;
	out.reserve(s.size());
	for (char ch : s) {
		if (ch == '\n' || ch == '\r' || ch == '\t')
			out += ' ';
		else if (ch == '#') // starts a KTAP directive
			out += "no. ";
		else
			out += ch;
	}
	return out;
}

} // namespace sockbuf::contract
