// SPDX-License-Identifier: MIT
// Latency samples and the summary both clients print.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <vector>

namespace examples
{

struct latency_summary {
	double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

// Nearest-rank percentiles; sorts @us_samples.
latency_summary summarize(std::vector<double> &us_samples);

// The summary's fields as both clients name them in their --json line:
// p50_us, p90_us, p99_us, p999_us, max_us.
nlohmann::json latency_json(const latency_summary &s);

} // namespace examples
