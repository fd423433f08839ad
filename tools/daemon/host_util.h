// SPDX-License-Identifier: MIT
// What the files of the host (host.h) share beyond the class: the
// monotonic clock in microseconds, for the costs they account.
#pragma once

#include <cstdint>

namespace sockbuf::daemon
{

uint64_t now_us();

} // namespace sockbuf::daemon
