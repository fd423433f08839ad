// SPDX-License-Identifier: MIT
// The scenario list, in the order the suite runs them.
#include "scenario.h"

namespace sockbuf::contract
{

scenario_spec scenario_bulk();
scenario_spec scenario_slow_reader();
scenario_spec scenario_stop_resume();
scenario_spec scenario_bursty();
scenario_spec scenario_parallel();
scenario_spec scenario_request_response();
scenario_spec scenario_jitter();
scenario_spec scenario_shaped();
scenario_spec scenario_large();
scenario_spec scenario_pressure();
scenario_spec scenario_cuts();

const std::vector<scenario_spec> &all_scenarios()
{
	static const std::vector<scenario_spec> list = {
	    scenario_bulk(),	 scenario_slow_reader(), scenario_stop_resume(),
	    scenario_bursty(),	 scenario_parallel(),	 scenario_request_response(),
	    scenario_jitter(),	 scenario_shaped(),	 scenario_large(),
	    scenario_pressure(), scenario_cuts()};
	return list;
}

} // namespace sockbuf::contract
