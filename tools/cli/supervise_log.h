// SPDX-License-Identifier: MIT
// The supervisor's log (the configuration's log: item).
#pragma once

#include "shim/config.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <string>
#include <unistd.h>

namespace sockbuf::cli::run::supervision
{

// Where the configuration's log: item sends lines (no rate limit here).
class logger
{
public:
	explicit logger(const shim::config &cfg)
	{
		switch (cfg.log) {
		case shim::log_target::to_stderr:
			fd_ = dup(STDERR_FILENO);
			break;
		case shim::log_target::to_fd:
			fd_ = dup(cfg.log_fd);
			break;
		case shim::log_target::to_file:
			fd_ = open(cfg.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
			break;
		case shim::log_target::none:
			break;
		}
	}
	~logger()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	logger(const logger &) = delete;
	logger &operator=(const logger &) = delete;
	bool on() const { return fd_ >= 0; }
	void line(const std::string &s) const
	{
		if (fd_ < 0)
			return;
		std::string l = fmt::format("sockbuf-run[{}]: {}\n", getpid(), s);
		ssize_t n = write(fd_, l.data(), l.size());
		(void)n;
	}

private:
	int fd_ = -1;
};

} // namespace sockbuf::cli::run::supervision
