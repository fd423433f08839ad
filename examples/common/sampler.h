// SPDX-License-Identifier: MIT
// Buffer size over time: a thread that reads each registered socket's
// sizes with sockbuf_get_state() every few milliseconds and writes CSV
// (t_ms,conn,sndbuf,rcvbuf,lock).  Sockets must be removed before close().
#pragma once

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace examples
{

class buffer_sampler
{
public:
	// Empty @path: a sampler that records nothing.
	buffer_sampler(const std::string &path, int interval_ms, double max_seconds);
	~buffer_sampler();
	buffer_sampler(const buffer_sampler &) = delete;
	buffer_sampler &operator=(const buffer_sampler &) = delete;

	void add(int fd, int conn);
	void remove(int fd);

private:
	void run();

	std::FILE *out_ = nullptr;
	int interval_ms_;
	double max_seconds_;
	std::mutex lock_;
	std::vector<std::pair<int, int>> fds_; // fd, conn id
	std::atomic<bool> stop_{false};
	std::thread thread_;
};

} // namespace examples
