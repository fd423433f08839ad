// SPDX-License-Identifier: MIT
// Latency samples and the summary both clients print.
#pragma once

#include <cstdint>
#include <vector>

namespace examples
{

struct latency_summary {
	double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

// Nearest-rank percentiles; sorts @us_samples.
latency_summary summarize(std::vector<double> &us_samples);

} // namespace examples
