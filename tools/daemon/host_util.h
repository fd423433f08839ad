// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

namespace sockbuf::daemon
{

uint64_t now_us();

} // namespace sockbuf::daemon
