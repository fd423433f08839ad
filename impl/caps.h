// SPDX-License-Identifier: MIT
// Capabilities, asked of libcap-ng.
#pragma once

namespace sockbuf::caps
{

// True when CAP_NET_ADMIN is in this thread's effective set, the condition
// under which the kernel honours SO_SNDBUFFORCE/SO_RCVBUFFORCE.
bool net_admin_effective();

} // namespace sockbuf::caps
