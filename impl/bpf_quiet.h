// SPDX-License-Identifier: MIT
// What the library's two BPF loaders (bpf_pass.cc, guard_events.cc)
// share: libbpf kept quiet while loading, and errno as a result.
#pragma once

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdarg>

namespace sockbuf::bpf
{

// libbpf prints its diagnostics on stderr by default: a refused load (no
// CAP_BPF) must not write into the host program's stderr.  The printer is
// libbpf's global; it is put back right after.
class quiet_libbpf
{
public:
	quiet_libbpf() : old_(libbpf_set_print(print_nothing)) {}
	~quiet_libbpf() { libbpf_set_print(old_); }
	quiet_libbpf(const quiet_libbpf &) = delete;
	quiet_libbpf &operator=(const quiet_libbpf &) = delete;

private:
	static int print_nothing(enum libbpf_print_level, const char *, va_list) { return 0; }
	libbpf_print_fn_t old_;
};

// -errno of the call that just failed, or @fallback where it set none.
inline int errno_or(int fallback)
{
	return errno > 0 ? -errno : fallback;
}

} // namespace sockbuf::bpf
