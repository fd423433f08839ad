// SPDX-License-Identifier: MIT
// The tools' test seam: SOCKBUF_RUN_FAULT names one fault a test wants
// (remote_guard.cc, closer.cc and, in tools/cli, supervise*.cc and
// cmd_fix.cc say what each does).
#pragma once

#include <cstdlib>
#include <cstring>

namespace sockbuf::cli
{

// Whether SOCKBUF_RUN_FAULT asks for @what.
inline bool test_fault(const char *what)
{
	const char *f = std::getenv("SOCKBUF_RUN_FAULT");
	return f && !std::strcmp(f, what);
}

} // namespace sockbuf::cli
