// SPDX-License-Identifier: MIT
// Optional, rate-limited logging of what the shim did.  Lines are built in
// a stack buffer and written with one write(2): no stdio, no allocation, so
// a line may be logged from a signal handler.
#pragma once

#include "config.h"

#include <cstddef>

namespace sockbuf::shim::log
{

// Opens the configured target (at load time).  Returns false, with a
// reason in @err, when a log file cannot be opened.
bool open(const config &cfg, char *err, size_t errlen);
bool enabled();

class line
{
public:
	line();
	line &s(const char *text);
	line &i(long long value);
	void emit(); // subject to the rate limit

private:
	char buf_[256];
	size_t n_ = 0;
};

} // namespace sockbuf::shim::log
