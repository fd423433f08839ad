// SPDX-License-Identifier: MIT
// The line `--version` prints in every command: the program's version
// (built from this tree's SOCKBUF_VERSION) and the library's that is
// loaded (sockbuf_version()); the two differ only when a packaged tool
// meets another release of libsockbuf0.
#pragma once

#include <sockbuf/sockbuf.h>

#include <string>

namespace sockbuf::release
{

// "0.3.0" from SOCKBUF_VERSION's one number (major * 10000 + minor * 100
// + patch).
inline std::string version_text(int v)
{
	return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
	       std::to_string(v % 100);
}

// "sockbuf 0.3.0 (libsockbuf 0.3.0)".
inline std::string version_line(const char *program)
{
	return std::string(program) + " " + version_text(SOCKBUF_VERSION) + " (libsockbuf " +
	       version_text(sockbuf_version()) + ")";
}

} // namespace sockbuf::release
