// SPDX-License-Identifier: MIT
// The document sockbuf-contract reports from, for one scenario's run: what
// the selftests hand to text_report() and markdown_report().
#pragma once

#include "report.h"

#include <vector>

namespace sockbuf::contract
{

inline json report_of(const scenario_result &r, const std::vector<verdict> &verdicts)
{
	return {{"kernel", {{"release", "test"}, {"version", "test"}}},
		{"profile", "quick"},
		{"privileged", true},
		{"seconds", r.seconds},
		{"sysctls", json::object()},
		{"features", json::object()},
		{"scenarios", json::array({scenario_json(r, verdicts, false)})}};
}

} // namespace sockbuf::contract
