// SPDX-License-Identifier: MIT
// libFuzzer target for the shim's configuration parser: no crash, no
// out-of-bounds read, always a terminated message, and a successful parse
// always yields values inside the documented ranges.
#include "config.h"

#include <sockbuf/sockbuf.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

using namespace sockbuf::shim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	config cfg;
	char err[96];
	std::memset(err, 'x', sizeof(err));
	bool ok = parse(reinterpret_cast<const char *>(data), size, &cfg, err, sizeof(err));
	if (std::memchr(err, '\0', sizeof(err)) == nullptr)
		std::abort();
	if (!ok)
		return 0;
	if (err[0] != '\0' || cfg.nports < 0 || cfg.nports > max_port_rules)
		std::abort();
	for (int r = 0; r < role_count; r++)
		for (int d = 0; d < 2; d++)
			if (cfg.size[r][d] < 0 || cfg.size[r][d] > SOCKBUF_SIZE_MAX)
				std::abort();
	for (int i = 0; i < cfg.nports; i++)
		if (cfg.ports[i].port == 0 || cfg.ports[i].pol == policy::unset)
			std::abort();
	if (cfg.log_rate < 1 || cfg.log_rate > 1000000)
		std::abort();
	if (cfg.log == log_target::to_file &&
	    (cfg.log_path[0] != '/' ||
	     std::memchr(cfg.log_path, '\0', sizeof(cfg.log_path)) == nullptr))
		std::abort();
	(void)resolve(cfg, role_listener, 2049);
	return 0;
}
