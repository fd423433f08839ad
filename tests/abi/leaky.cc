// SPDX-License-Identifier: MIT
// A shared library built the way libsockbuf was before its version script:
// hidden visibility, one C function exported by SOCKBUF_API.  The std::
// templates it instantiates are default-visibility in libstdc++'s headers,
// so they land in its dynamic symbol table beside the unversioned function.
#include <sockbuf/sockbuf.h>

#include <memory>
#include <unordered_map>

extern "C" SOCKBUF_API int sockbuf_version(void)
{
	static std::unordered_map<unsigned int, unsigned long> seen;
	auto one = std::make_shared<int>(1);
	seen[SOCKBUF_VERSION] += static_cast<unsigned long>(*one);
	return SOCKBUF_VERSION + static_cast<int>(seen.size()) - 1;
}
