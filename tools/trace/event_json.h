// SPDX-License-Identifier: MIT
// One recorded kernel event as JSON, in the one shape that the contract
// suite's reports and the kernel check's results share, so that
// tests/kernels/render.py reads both alike.  Header-only: only those two
// readers of the recorder write JSON (nlohmann, header-only as well).
#pragma once

#include "trace.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace sockbuf::trace
{

// @e relative to @t0_ns (the traffic's start: "t_ms") and to @at_ns (the
// moment it may explain: "before_ms"); @match says how it was matched
// ("socket" or "window").
inline nlohmann::ordered_json event_json(const event &e, int64_t t0_ns, int64_t at_ns,
					 const char *match)
{
	nlohmann::ordered_json f = nlohmann::ordered_json::object();
	for (const auto &[k, v] : e.fields)
		f[k] = v;
	nlohmann::ordered_json j = {{"name", e.name},
				    {"t_ms", double(e.time_ns - t0_ns) / 1e6},
				    {"before_ms", double(at_ns - e.time_ns) / 1e6},
				    {"match", match},
				    {"pid", e.pid},
				    {"fields", f}};
	if (e.sk) {
		char sk[32];
		std::snprintf(sk, sizeof(sk), "%#llx", static_cast<unsigned long long>(e.sk));
		j["sk"] = sk;
	}
	if (e.sport >= 0)
		j["ports"] = {e.sport, e.dport};
	return j;
}

} // namespace sockbuf::trace
