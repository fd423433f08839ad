// SPDX-License-Identifier: MIT
// Load-time decisions: read the configuration, honour secure execution,
// decide whether the shim is active.  decide() is pure (inputs in, result
// out) so tests can inject an AT_SECURE value and any configuration text.
#pragma once

#include "config.h"

#include <cstddef>

namespace sockbuf::shim
{

inline constexpr const char *default_conf_path = "/etc/sockbuf/shim.conf";

struct load_input {
	const char *env = nullptr;  // SOCKBUF_SHIM, or nullptr when unset
	const char *file = nullptr; // the configuration file's text, or nullptr
	size_t file_len = 0;
	const char *file_name = nullptr;  // for messages
	const char *file_error = nullptr; // why a named file could not be read
	unsigned long at_secure = 0;	  // getauxval(AT_SECURE)
};

struct load_result {
	bool active = false;
	config cfg;
	char warning[384] = {}; // one line for stderr, empty when none
};

void decide(const load_input &in, load_result *out);

// Removes every LD_PRELOAD entry whose file name is @lib_name from the
// environment string @preload ("a.so:b.so c.so"), in place, without
// allocating.  Returns true when something was removed.
bool drop_from_preload(char *preload, const char *lib_name);

} // namespace sockbuf::shim
