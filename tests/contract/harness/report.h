// SPDX-License-Identifier: MIT
// Results as JSON (one object per scenario, gathered into one document)
// and as text a person reads: a scenario x clause table of raw/library
// verdicts, then every failure and skip with its reason.
#pragma once

#include "model.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace sockbuf::contract
{

using json = nlohmann::ordered_json;

// One scenario: summary per arm and role, sampler and guard figures,
// verdicts; with @series the sampled time series of every socket.
json scenario_json(const scenario_result &r, const std::vector<verdict> &verdicts, bool series);

// Verdicts of a scenario that did not run: every clause skipped.
std::vector<verdict> skipped_verdicts(const std::string &scenario, const std::string &why,
				      const std::vector<std::string> &only);

// The table and the lists, from the whole document.
std::string text_report(const json &doc);
std::string markdown_report(const json &doc);

} // namespace sockbuf::contract
