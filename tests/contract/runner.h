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
	double timeout_s = 120; // per scenario, then the child is killed
};

json run_in_namespace(const scenario_spec &spec, const run_options &opt);

} // namespace sockbuf::contract
