// SPDX-License-Identifier: MIT
// Runs one scenario in a child process inside a fresh network namespace
// and brings back its JSON (results and verdicts).
#pragma once

#include "report.h"
#include "scenario.h"

namespace sockbuf::contract
{

struct run_options {
	profile prof;
	std::vector<std::string> clauses; // empty: all
	bool series = false;
	double timeout_s = 175; // per scenario, then the child is killed
};

json run_in_namespace(const scenario_spec &spec, const run_options &opt);

// The verdicts of one run: every clause skipped with the reason when the
// scenario did not run or aborted at setup (integrity then fails),
// otherwise judge_all().
std::vector<verdict> judge_scenario(const scenario_result &r, const std::vector<std::string> &only);

} // namespace sockbuf::contract
