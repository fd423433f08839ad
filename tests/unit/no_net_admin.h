// SPDX-License-Identifier: MIT
// For the tests of what the library does without CAP_NET_ADMIN: they drop
// it in a forked child, so that the test process keeps it for the others.
#pragma once

#include <sockbuf/sockbuf.h>

#include <cap-ng.h>
#include <linux/capability.h>
#include <unistd.h>

namespace sockbuf::test
{

// In a forked child only: drops CAP_NET_ADMIN (effective and permitted)
// and returns a fresh probe, which must no longer see SOCKBUF_FEAT_FORCE.
// Exits the child with 3 when the drop fails, 4 when the probe fails or
// still sees FORCE (the parent's message names both codes).
inline struct sockbuf_probe_info drop_net_admin_in_child()
{
	capng_get_caps_process();
	capng_update(CAPNG_DROP, (capng_type_t)(CAPNG_EFFECTIVE | CAPNG_PERMITTED), CAP_NET_ADMIN);
	if (capng_apply(CAPNG_SELECT_CAPS) != 0)
		_exit(3);
	struct sockbuf_probe_info p;
	if (sockbuf_probe(&p, SOCKBUF_PROBE_FRESH) != 0 || (p.features & SOCKBUF_FEAT_FORCE))
		_exit(4);
	return p;
}

} // namespace sockbuf::test
