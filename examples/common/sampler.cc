// SPDX-License-Identifier: MIT
#include "sampler.h"

#include "net.h"

#include <sockbuf/sockbuf.h>

#include <algorithm>
#include <stdexcept>
#include <time.h>

namespace examples
{

buffer_sampler::buffer_sampler(const std::string &path, int interval_ms, double max_seconds)
    : interval_ms_(interval_ms), max_seconds_(max_seconds)
{
	if (path.empty())
		return;
	out_ = std::fopen(path.c_str(), "w");
	if (!out_)
		throw std::runtime_error("cannot write " + path);
	std::fprintf(out_, "t_ms,conn,sndbuf,rcvbuf,lock\n");
	thread_ = std::thread([this] { run(); });
}

buffer_sampler::~buffer_sampler()
{
	stop_ = true;
	if (thread_.joinable())
		thread_.join();
	if (out_)
		std::fclose(out_);
}

void buffer_sampler::add(int fd, int conn)
{
	if (!out_)
		return;
	std::lock_guard<std::mutex> g(lock_);
	fds_.emplace_back(fd, conn);
}

void buffer_sampler::remove(int fd)
{
	if (!out_)
		return;
	std::lock_guard<std::mutex> g(lock_);
	fds_.erase(
	    std::remove_if(fds_.begin(), fds_.end(), [fd](const auto &e) { return e.first == fd; }),
	    fds_.end());
}

void buffer_sampler::run()
{
	const double start = now_seconds();
	const timespec pause = {0, static_cast<long>(interval_ms_) * 1000000L};
	while (!stop_ && now_seconds() - start < max_seconds_) {
		{
			std::lock_guard<std::mutex> g(lock_);
			double t_ms = (now_seconds() - start) * 1000.0;
			for (const auto &[fd, conn] : fds_) {
				struct sockbuf_state st;
				if (sockbuf_get_state(fd, &st) == 0)
					std::fprintf(out_, "%.1f,%d,%d,%d,%d\n", t_ms, conn,
						     st.sndbuf, st.rcvbuf, st.lock);
			}
		}
		// The sampling period, not synchronisation.
		nanosleep(&pause, nullptr);
	}
}

} // namespace examples
