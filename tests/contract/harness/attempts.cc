// SPDX-License-Identifier: MIT
#include "attempts.h"

#include "model.h"

namespace sockbuf::contract
{

namespace
{

bool has_library_outcome(const json &scenario, outcome o)
{
	if (!scenario.contains("verdicts"))
		return false;
	for (const auto &v : scenario["verdicts"])
		if (v.contains("library") && v["library"]["verdict"] == outcome_name(o))
			return true;
	return false;
}

json half_summary(const json &h)
{
	json s = {{"verdict", h.value("verdict", "")}, {"why", h.value("why", "")}};
	if (h.contains("bound_ms")) {
		s["max_gap_ms"] = h["max_gap_ms"];
		s["bound_ms"] = h["bound_ms"];
	}
	return s;
}

} // namespace

bool wants_second_attempt(const json &scenario)
{
	return has_library_outcome(scenario, outcome::unverified) &&
	       !has_library_outcome(scenario, outcome::fail);
}

json with_earlier_attempt(json again, const json &first)
{
	json verdicts = json::array();
	for (const auto &v : first["verdicts"])
		verdicts.push_back({{"clause", v["clause"]},
				    {"raw", half_summary(v["raw"])},
				    {"library", half_summary(v["library"])}});
	json earlier = {{"verdicts", verdicts}};
	if (first.contains("sampler"))
		earlier["sampler"] = first["sampler"];
	if (first.contains("seconds"))
		earlier["seconds"] = first["seconds"];
	again["earlier_attempts"] = json::array({earlier});
	return again;
}

json run_with_second_attempt(const std::function<json()> &run,
			     const std::function<void(const json &, int attempt)> &after_each)
{
	json first = run();
	after_each(first, 1);
	if (!wants_second_attempt(first))
		return first;
	json merged = with_earlier_attempt(run(), first);
	after_each(merged, 2);
	return merged;
}

std::string earlier_attempt_text(const json &scenario)
{
	if (!scenario.contains("earlier_attempts") || scenario["earlier_attempts"].empty())
		return "";
	std::string out = scenario.value("name", "") + ": second attempt; the first";
	std::string sep = " ";
	for (const auto &v : scenario["earlier_attempts"][0]["verdicts"])
		if (v["library"]["verdict"] == outcome_name(outcome::unverified)) {
			out += sep + v["clause"].get<std::string>() +
			       " library unverified: " + v["library"]["why"].get<std::string>();
			sep = "; ";
		}
	return out;
}

} // namespace sockbuf::contract
