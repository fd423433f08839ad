// SPDX-License-Identifier: MIT
#include "pressure.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace sockbuf::kcheck
{

namespace
{
const char tcp_mem_path[] = "/proc/sys/net/ipv4/tcp_mem";
}

std::optional<tcp_mem_t> read_tcp_mem()
{
	std::ifstream in(tcp_mem_path);
	tcp_mem_t v{};
	if (!(in >> v[0] >> v[1] >> v[2]))
		return std::nullopt;
	return v;
}

bool write_tcp_mem(const tcp_mem_t &v)
{
	std::ofstream out(tcp_mem_path);
	out << v[0] << ' ' << v[1] << ' ' << v[2] << '\n';
	out.flush();
	return static_cast<bool>(out);
}

long tcp_pages_in_use()
{
	std::ifstream in("/proc/net/sockstat");
	std::string line;
	while (std::getline(in, line)) {
		if (line.rfind("TCP:", 0) != 0)
			continue;
		auto pos = line.find(" mem ");
		if (pos == std::string::npos)
			return -1;
		return std::stol(line.substr(pos + 5));
	}
	return -1;
}

void tcp_mem_squeeze::tick(std::chrono::milliseconds now)
{
	if (!active_ && !done_ && now >= from_) {
		before = read_tcp_mem();
		pages_at_apply = tcp_pages_in_use();
		if (!before)
			return;
		// Under the memory already in use: every new allocation is
		// over the hard limit, as on a machine that ran out.
		long low = std::max(8L, pages_at_apply / 8);
		applied = tcp_mem_t{low, low, low};
		write_failed = !write_tcp_mem(*applied);
		active_ = !write_failed;
		done_ = write_failed;
	} else if (active_ && now >= until_) {
		release();
	}
}

void tcp_mem_squeeze::release()
{
	if (active_ && before)
		write_tcp_mem(*before);
	active_ = false;
	done_ = true;
}

} // namespace sockbuf::kcheck
