// SPDX-License-Identifier: MIT
// Names of enums and bits, for logs and reports.
#include <sockbuf/sockbuf.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

extern "C" {

const char *sockbuf_strategy_name(int strategy)
{
	switch (strategy) {
	case SOCKBUF_STRAT_NONE:
		return "none";
	case SOCKBUF_STRAT_UNLOCK:
		return "unlock";
	case SOCKBUF_STRAT_RCVLOWAT:
		return "rcvlowat";
	case SOCKBUF_STRAT_LOCK:
		return "lock";
	case SOCKBUF_STRAT_FORCE_LOCK:
		return "force-lock";
	case SOCKBUF_STRAT_FORCE_UNLOCK:
		return "force-unlock";
	case SOCKBUF_STRAT_DEFAULT:
		return "default";
	case SOCKBUF_STRAT_HELD:
		return "held";
	default:
		return "?";
	}
}

const char *sockbuf_feature_name(uint32_t feature)
{
	switch (feature) {
	case SOCKBUF_FEAT_BUF_LOCK:
		return "SO_BUF_LOCK";
	case SOCKBUF_FEAT_RCVLOWAT_RAISE:
		return "SO_RCVLOWAT raise";
	case SOCKBUF_FEAT_RESERVE_MEM:
		return "SO_RESERVE_MEM";
	case SOCKBUF_FEAT_FORCE:
		return "SO_*BUFFORCE (CAP_NET_ADMIN)";
	case SOCKBUF_FEAT_TCP_INFO:
		return "TCP_INFO";
	default:
		return "?";
	}
}

const char *sockbuf_reserve_state_name(int state)
{
	switch (state) {
	case SOCKBUF_RESERVE_UNKNOWN:
		return "unknown";
	case SOCKBUF_RESERVE_USABLE:
		return "usable";
	case SOCKBUF_RESERVE_NO_OPTION:
		return "no-option";
	case SOCKBUF_RESERVE_ROOT_CGROUP:
		return "root-cgroup";
	case SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING:
		return "v1-no-tcp-accounting";
	case SOCKBUF_RESERVE_NOSOCKET:
		return "nosocket";
	case SOCKBUF_RESERVE_NO_MEMORY_CONTROLLER:
		return "no-memory-controller";
	default:
		return "?";
	}
}

int sockbuf_clamp_names(uint32_t clamps, char *buf, unsigned int len)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {
	    {SOCKBUF_CLAMP_MEM_MAX, "mem_max"},
	    {SOCKBUF_CLAMP_SOCK_MIN, "sock_min"},
	    {SOCKBUF_CLAMP_ODD, "odd"},
	    {SOCKBUF_CLAMP_TCP_MEM_MAX, "tcp_mem_max"},
	    {SOCKBUF_CLAMP_RCVLOWAT_CAP, "rcvlowat_cap"},
	    {SOCKBUF_CLAMP_ALREADY_LARGER, "already_larger"},
	};
	if (!buf && len)
		return -EINVAL;
	char all[128]; // every name together fits with room to spare
	size_t used = 0;
	all[0] = '\0';
	for (const auto &n : names)
		if (clamps & n.bit)
			used += std::snprintf(all + used, sizeof(all) - used, "%s%s",
					      used ? "," : "", n.name);
	if (len)
		std::snprintf(buf, len, "%s", all);
	return (int)used;
}

int sockbuf_version(void)
{
	return SOCKBUF_VERSION;
}

} // extern "C"
