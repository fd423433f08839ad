// SPDX-License-Identifier: MIT
#include "log.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

namespace sockbuf::shim::log
{

namespace
{

std::atomic<int> g_fd{-1};
int g_rate = 10;
// One-second windows: at most g_rate lines in each, the rest counted.
std::atomic<long long> g_window{-1};
std::atomic<int> g_in_window{0};
std::atomic<int> g_dropped{0};

long long now_seconds()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); // vDSO: signal-safe
	return ts.tv_sec;
}

void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = ::write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; // logging never blocks or fails the host
		p += w;
		n -= size_t(w);
	}
}

} // namespace

bool open(const config &cfg, char *err, size_t errlen)
{
	g_rate = cfg.log_rate;
	switch (cfg.log) {
	case log_target::none:
		return true;
	case log_target::to_stderr:
		g_fd.store(STDERR_FILENO);
		return true;
	case log_target::to_fd:
		g_fd.store(cfg.log_fd);
		return true;
	case log_target::to_file: {
		int fd = ::open(cfg.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0) {
			std::snprintf(err, errlen, "cannot open log file %s: %s", cfg.log_path,
				      std::strerror(errno));
			return false;
		}
		g_fd.store(fd);
		return true;
	}
	}
	return true;
}

bool enabled()
{
	return g_fd.load(std::memory_order_relaxed) >= 0;
}

line::line()
{
	s("sockbuf-shim[").i(getpid()).s("]: ");
}

line &line::s(const char *text)
{
	while (*text && n_ < sizeof(buf_) - 1)
		buf_[n_++] = *text++;
	return *this;
}

line &line::i(long long value)
{
	char digits[24];
	int k = 0;
	unsigned long long v =
	    value < 0 ? 0ull - (unsigned long long)value : (unsigned long long)value;
	do {
		digits[k++] = char('0' + v % 10);
		v /= 10;
	} while (v && k < int(sizeof(digits)));
	if (value < 0 && n_ < sizeof(buf_) - 1)
		buf_[n_++] = '-';
	while (k > 0 && n_ < sizeof(buf_) - 1)
		buf_[n_++] = digits[--k];
	return *this;
}

void line::emit()
{
	int fd = g_fd.load(std::memory_order_relaxed);
	if (fd < 0)
		return;
	long long now = now_seconds();
	long long seen = g_window.load(std::memory_order_relaxed);
	if (seen != now && g_window.compare_exchange_strong(seen, now)) {
		g_in_window.store(0, std::memory_order_relaxed);
		if (int dropped = g_dropped.exchange(0)) {
			line note;
			note.s("(").i(dropped).s(" lines dropped by log_rate)\n");
			write_all(fd, note.buf_, note.n_);
		}
	}
	if (g_in_window.fetch_add(1, std::memory_order_relaxed) >= g_rate) {
		g_dropped.fetch_add(1, std::memory_order_relaxed);
		return;
	}
	buf_[n_ < sizeof(buf_) - 1 ? n_++ : sizeof(buf_) - 2] = '\n';
	write_all(fd, buf_, n_);
}

} // namespace sockbuf::shim::log
