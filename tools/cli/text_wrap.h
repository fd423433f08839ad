// SPDX-License-Identifier: MIT
// Text for an 80-column terminal, shared by `sockbuf` and sockbuf-contract:
// sentences wrapped between words with a hanging indent.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sockbuf::text
{

inline constexpr size_t terminal_width = 80;

// @text as lines of at most @width columns, each ending in '\n': the first
// starts with @first, the others with @rest.  A word longer than a line
// (a socket name, a path) stands alone on its line rather than be cut.
std::string wrap(std::string_view text, std::string_view first, std::string_view rest,
		 size_t width = terminal_width);

} // namespace sockbuf::text
