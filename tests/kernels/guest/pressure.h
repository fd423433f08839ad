// SPDX-License-Identifier: MIT
// pressure.h - global TCP memory pressure for the middle of a transfer.
// Changes net.ipv4.tcp_mem, a machine-wide setting: only for a guest
// kernel that runs nothing else.
#pragma once

#include <array>
#include <chrono>
#include <optional>

namespace sockbuf::kcheck
{

using tcp_mem_t = std::array<long, 3>; // pages: min, pressure, max

std::optional<tcp_mem_t> read_tcp_mem();
bool write_tcp_mem(const tcp_mem_t &v);
// Pages the kernel counts as used by TCP ("TCP: ... mem N" in sockstat).
long tcp_pages_in_use();

// Lowers tcp_mem under the pages in use between two points of a transfer
// and puts it back after, also when destroyed early.
class tcp_mem_squeeze
{
public:
	tcp_mem_squeeze(std::chrono::milliseconds from, std::chrono::milliseconds until)
	    : from_(from), until_(until)
	{
	}
	~tcp_mem_squeeze() { release(); }
	tcp_mem_squeeze(const tcp_mem_squeeze &) = delete;
	tcp_mem_squeeze &operator=(const tcp_mem_squeeze &) = delete;

	void tick(std::chrono::milliseconds now);
	void release();

	std::optional<tcp_mem_t> before, applied;
	long pages_at_apply = -1;
	bool write_failed = false;

private:
	std::chrono::milliseconds from_, until_;
	bool active_ = false, done_ = false;
};

} // namespace sockbuf::kcheck
