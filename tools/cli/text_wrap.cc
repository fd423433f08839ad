// SPDX-License-Identifier: MIT
#include "text_wrap.h"

namespace sockbuf::text
{

std::string wrap(std::string_view text, std::string_view first, std::string_view rest, size_t width)
{
	std::string out, line(first);
	bool empty = true; // no word on @line yet
	size_t pos = 0;
	while (pos < text.size()) {
		size_t start = text.find_first_not_of(' ', pos);
		if (start == std::string_view::npos)
			break;
		size_t end = text.find(' ', start);
		if (end == std::string_view::npos)
			end = text.size();
		std::string_view word = text.substr(start, end - start);
		pos = end;
		if (!empty && line.size() + 1 + word.size() > width) {
			out += line + "\n";
			line = rest;
			empty = true;
		}
		if (!empty)
			line += ' ';
		line += word;
		empty = false;
	}
	return out + line + "\n";
}

} // namespace sockbuf::text
