// SPDX-License-Identifier: MIT
// A second attempt for a scenario whose library verdict came out
// unverified.  "Unverified" is no evidence either way: the samples were
// further apart than the guard's repair bound (a stalled sampler), so a
// dip repaired too late could have gone unseen.  Running the scenario once
// more gathers the evidence that was missing; it never hides a failure:
//   - only a scenario with no library FAIL in any clause is run again
//     (a FAIL stands as it is);
//   - the second attempt's verdicts stand, whatever they are (FAIL,
//     unverified again, or pass);
//   - the first attempt's verdicts and sampler figures are kept in the
//     result ("earlier_attempts"), and every report says a verdict came
//     from a second attempt.
#pragma once

#include "report.h"

#include <functional>
#include <string>

namespace sockbuf::contract
{

// True when @scenario (its JSON result) has a library verdict
// "unverified" and no library verdict "FAIL".
bool wants_second_attempt(const json &scenario);

// @again with the first attempt's verdicts (clause, both halves' verdict,
// why, gap and bound) and sampler figures under "earlier_attempts".
json with_earlier_attempt(json again, const json &first);

// Runs @run (one scenario, start to verdicts) and, when
// wants_second_attempt() says so, once more; @after_each sees each
// attempt's result as it comes (progress lines).
json run_with_second_attempt(const std::function<json()> &run,
			     const std::function<void(const json &, int attempt)> &after_each);

// "request_response: second attempt; the first C3 library: <why>", or ""
// for a scenario run once.
std::string earlier_attempt_text(const json &scenario);

} // namespace sockbuf::contract
