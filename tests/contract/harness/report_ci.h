// SPDX-License-Identifier: MIT
// Contract results in the formats CI systems read natively: KTAP v1 as
// kselftest prints it (kernel labs: KernelCI, LKFT, LAVA) and JUnit XML
// (GitLab, Jenkins, GitHub test reporters).  Both are built from
// ci_suites() (report_cases.h): a test per scenario, a subtest per clause
// and arm.
#pragma once

#include "report_cases.h"

#include <string>

namespace sockbuf::contract
{

std::string ktap_report(const json &doc, const ci_options &opt);
std::string junit_report(const json &doc, const ci_options &opt);

} // namespace sockbuf::contract
