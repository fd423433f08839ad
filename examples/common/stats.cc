// SPDX-License-Identifier: MIT
#include "stats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace examples
{

namespace
{
double rank(const std::vector<double> &sorted, double p)
{
	size_t n = sorted.size();
	size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
	return sorted[std::min(n - 1, i == 0 ? 0 : i - 1)];
}
} // namespace

latency_summary summarize(std::vector<double> &us_samples)
{
	latency_summary s;
	if (us_samples.empty())
		return s;
	std::sort(us_samples.begin(), us_samples.end());
	s.p50_us = rank(us_samples, 0.50);
	s.p90_us = rank(us_samples, 0.90);
	s.p99_us = rank(us_samples, 0.99);
	s.p999_us = rank(us_samples, 0.999);
	s.max_us = us_samples.back();
	return s;
}

nlohmann::json latency_json(const latency_summary &s)
{
	return {{"p50_us", s.p50_us},
		{"p90_us", s.p90_us},
		{"p99_us", s.p99_us},
		{"p999_us", s.p999_us},
		{"max_us", s.max_us}};
}

} // namespace examples
