// SPDX-License-Identifier: MIT
// Capabilities, asked of libcap-ng.
#pragma once

namespace sockbuf::caps
{

// True when CAP_NET_ADMIN is in this thread's effective set, the condition
// under which the kernel honours SO_SNDBUFFORCE/SO_RCVBUFFORCE.
bool net_admin_effective();

// True when this thread's effective set allows tracing BPF programs
// (fexit, ring buffers): CAP_BPF and CAP_PERFMON (Linux 5.8), or
// CAP_SYS_ADMIN.  The kernel has the last word (a user namespace's
// root holds both and is still refused); this only spares a process that
// cannot load them the work of trying.
bool bpf_tracing_effective();

} // namespace sockbuf::caps
