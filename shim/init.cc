// SPDX-License-Identifier: MIT
#include "init.h"

#include <cstdio>
#include <cstring>

namespace sockbuf::shim
{

namespace
{

void warn(load_result *out, const char *source, const char *why)
{
	std::snprintf(out->warning, sizeof(out->warning),
		      "sockbuf-shim: %s: %s; the shim is inactive (plain libc behaviour)\n", source,
		      why);
}

// Nothing to do at all: every socket would be passed straight through.
bool all_passthrough(const config &cfg)
{
	if (cfg.global != policy::passthrough)
		return false;
	for (int r = role_listener; r < role_count; r++)
		if (cfg.by_role[r] != policy::unset && cfg.by_role[r] != policy::passthrough)
			return false;
	for (int i = 0; i < cfg.nports; i++)
		if (cfg.ports[i].pol != policy::passthrough)
			return false;
	return true;
}

} // namespace

void decide(const load_input &in, load_result *out)
{
	*out = load_result{};
	// Secure execution (setuid, setgid, file capabilities): the
	// environment belongs to a less privileged caller.  Stay out of it,
	// silently: such programs must not print on behalf of the caller.
	if (in.at_secure)
		return;

	char err[256];
	if (in.file_error) {
		warn(out, in.file_name ? in.file_name : "configuration file", in.file_error);
		return;
	}
	if (in.file && !parse(in.file, in.file_len, &out->cfg, err, sizeof(err))) {
		out->cfg = config{};
		warn(out, in.file_name ? in.file_name : "configuration file", err);
		return;
	}
	if (in.env && !parse(in.env, std::strlen(in.env), &out->cfg, err, sizeof(err))) {
		out->cfg = config{};
		warn(out, "SOCKBUF_SHIM", err);
		return;
	}
	out->active = !all_passthrough(out->cfg);
}

bool drop_from_preload(char *preload, const char *lib_name)
{
	// ld.so splits LD_PRELOAD at spaces and colons.
	size_t name_len = std::strlen(lib_name);
	char *out = preload;
	bool dropped = false;
	const char *p = preload;
	while (*p) {
		const char *start = p;
		while (*p && *p != ':' && *p != ' ')
			p++;
		size_t len = size_t(p - start);
		const char *base = start;
		for (const char *q = start; q < p; q++)
			if (*q == '/')
				base = q + 1;
		bool ours =
		    size_t(p - base) == name_len && std::memcmp(base, lib_name, name_len) == 0;
		if (ours) {
			dropped = true;
		} else if (len > 0) {
			if (out != preload)
				*out++ = ':';
			std::memmove(out, start, len);
			out += len;
		}
		if (*p)
			p++;
	}
	*out = '\0';
	return dropped;
}

} // namespace sockbuf::shim
