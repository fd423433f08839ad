// SPDX-License-Identifier: MIT
// Which capabilities this process holds, asked of libcap-ng.
#include "caps.h"

#include <cap-ng.h>
#include <cstdlib>
#include <linux/capability.h>

namespace sockbuf::caps
{

bool net_admin_effective()
{
	// libcap-ng keeps one state per thread.  A host program (or the shim's
	// host) may be using it: save that state and put it back afterwards.
	void *saved = capng_save_state();
	bool held = capng_get_caps_process() == 0 &&
		    capng_have_capability(CAPNG_EFFECTIVE, CAP_NET_ADMIN) != 0;
	if (saved)
		capng_restore_state(&saved); // frees it and sets it to NULL
	return held;
}

bool bpf_tracing_effective()
{
	void *saved = capng_save_state();
	bool held = false;
	if (capng_get_caps_process() == 0)
		held = capng_have_capability(CAPNG_EFFECTIVE, CAP_SYS_ADMIN) != 0 ||
		       (capng_have_capability(CAPNG_EFFECTIVE, CAP_BPF) != 0 &&
			capng_have_capability(CAPNG_EFFECTIVE, CAP_PERFMON) != 0);
	if (saved)
		capng_restore_state(&saved);
	return held;
}

} // namespace sockbuf::caps
