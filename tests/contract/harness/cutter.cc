// SPDX-License-Identifier: MIT
#include "cutter.h"

#include "child.h"
#include "clock.h"
#include "floor_judge.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

namespace sockbuf::contract
{

namespace
{

uint64_t next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

// The cutter process: system calls only, on the plan it was forked with.
[[noreturn]] void cutter_main(std::vector<cut_record> plan, const cut_spec &spec, pid_t parent,
			      int go_fd, int out_fd)
{
	// The scenario's sockets and pipes are not the cutter's.
	if (!after_fork(SIGKILL, {go_fd, out_fd}, parent))
		_exit(1);
	int64_t t0 = 0;
	ssize_t r;
	while ((r = read(go_fd, &t0, sizeof(t0))) < 0 && errno == EINTR)
		;
	if (r != ssize_t(sizeof(t0)))
		_exit(0); // the scenario ended before its traffic started
	const int pidfd = int(syscall(SYS_pidfd_open, parent, 0));
	const int64_t hard_end = t0 + int64_t(spec.end_s * 1e9) + 500'000'000;
	for (auto &c : plan) {
		const int64_t at = t0 + c.at_us * 1000;
		if (at > hard_end)
			break;
		struct timespec ts = {time_t(at / 1'000'000'000), long(at % 1'000'000'000)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR)
			;
		if (pidfd < 0) {
			c.err = -errno;
			c.step = 1;
			continue;
		}
		const int fd = int(syscall(SYS_pidfd_getfd, pidfd, c.target_fd, 0));
		if (fd < 0) {
			c.err = -errno;
			c.step = 1;
			continue;
		}
		const int opt = c.dir ? SO_RCVBUF : SO_SNDBUF;
		if (setsockopt(fd, SOL_SOCKET, opt, &spec.size, sizeof(spec.size)) != 0) {
			c.err = -errno;
			c.step = 2;
		} else {
			c.done_us = (now_ns() - t0) / 1000;
			if (setsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &c.lock, sizeof(c.lock)) != 0) {
				c.err = -errno;
				c.step = 3;
			}
			int v = -1;
			socklen_t len = sizeof(v);
			if (getsockopt(fd, SOL_SOCKET, opt, &v, &len) == 0)
				c.size_after = v;
			len = sizeof(v);
			if (getsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &v, &len) == 0)
				c.lock_after = v;
		}
		close(fd); // the scenario's process keeps the socket
	}
	_exit(write_all(out_fd, plan.data(), plan.size() * sizeof(cut_record)) ? 0 : 2);
}

} // namespace

cutter::~cutter()
{
	end_child();
}

void cutter::end_child()
{
	if (go_fd_ >= 0)
		close(go_fd_);
	go_fd_ = -1;
	if (out_fd_ >= 0)
		close(out_fd_);
	out_fd_ = -1;
	if (pid_ > 0) {
		kill(pid_, SIGKILL);
		while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR)
			;
	}
	pid_ = -1;
}

std::string cutter::start(const std::vector<socket_record> &sockets, const cut_spec &spec)
{
	spec_ = spec;
	std::vector<int> targets;
	for (size_t i = 0; i < sockets.size(); i++) {
		const auto &s = sockets[i];
		if (time_bounded(s.a) && s.r != role::listener && s.fd >= 0 &&
		    (s.snd.floor > 0 || s.rcv.floor > 0))
			targets.push_back(int(i));
	}
	if (targets.empty() || spec.count <= 0)
		return "no guarded socket to cut";
	// Before 5.15 a setsockopt() cut locks the buffer for good: there is
	// no SO_BUF_LOCK to take the lock off, and the guard raises no locked
	// buffer (sockbuf_guard_new(3)), so every such cut would be a dip for
	// the rest of the run, judging nothing of the guard.
	int lock = 0;
	socklen_t len = sizeof(lock);
	if (getsockopt(sockets[size_t(targets[0])].fd, SOL_SOCKET, SO_BUF_LOCK, &lock, &len) != 0 &&
	    errno == ENOPROTOOPT)
		return "this kernel has no SO_BUF_LOCK: a setsockopt() cut would lock the buffer "
		       "for good, which no guard undoes";
	uint64_t rng = spec.seed * 0x9e3779b97f4a7c15ull | 1;
	for (size_t i = targets.size(); i > 1; i--)
		std::swap(targets[i - 1], targets[size_t(next_random(&rng) % i)]);
	std::vector<int64_t> times;
	times.reserve(size_t(spec.count));
	const int64_t from = int64_t(spec.start_s * 1e6),
		      span = int64_t((spec.end_s - spec.start_s) * 1e6);
	for (int i = 0; i < spec.count; i++)
		times.push_back(from +
				int64_t(next_random(&rng) % uint64_t(std::max<int64_t>(1, span))));
	std::sort(times.begin(), times.end());
	std::map<int, int> made; // cuts per socket so far: the direction alternates
	plan_.clear();
	plan_.reserve(size_t(spec.count));
	for (int i = 0; i < spec.count; i++) {
		cut_record c;
		c.at_us = times[size_t(i)];
		c.socket = targets[size_t(i) % targets.size()];
		const socket_record &s = sockets[size_t(c.socket)];
		c.target_fd = s.fd;
		c.dir = made[c.socket]++ % 2;
		if ((c.dir == 0 && s.snd.floor <= 0) || (c.dir == 1 && s.rcv.floor <= 0))
			c.dir ^= 1;
		c.lock = (next_random(&rng) & 1) ? 3 : 0;
		plan_.push_back(c);
	}
	int go[2], out[2];
	if (pipe2(go, O_CLOEXEC) != 0)
		return fmt::format("pipe: {}", strerror(errno));
	if (pipe2(out, O_CLOEXEC) != 0) {
		const int e = errno;
		close(go[0]);
		close(go[1]);
		return fmt::format("pipe: {}", strerror(e));
	}
	const pid_t parent = getpid();
	fflush(nullptr);
	const pid_t pid = fork();
	if (pid < 0) {
		const int e = errno;
		for (int fd : {go[0], go[1], out[0], out[1]})
			close(fd);
		return fmt::format("fork: {}", strerror(e));
	}
	if (pid == 0)
		cutter_main(plan_, spec, parent, go[0], out[1]);
	close(go[0]);
	close(out[1]);
	// Yama's ptrace_scope 1 lets only a descendant's ancestors take its
	// descriptors: the cutter is a child, so name it (no Yama: EINVAL).
	prctl(PR_SET_PTRACER, pid, 0, 0, 0);
	pid_ = pid;
	go_fd_ = go[1];
	out_fd_ = out[0];
	return "";
}

void cutter::go(int64_t t0_ns)
{
	t0_ns_ = t0_ns;
	if (go_fd_ >= 0 && !write_all(go_fd_, &t0_ns, sizeof(t0_ns)))
		end_child();
}

std::vector<cut_record> cutter::finish()
{
	std::vector<cut_record> got;
	if (pid_ <= 0)
		return got;
	close(go_fd_); // a cutter still waiting for its clock ends
	go_fd_ = -1;
	std::string text;
	// The cutter is done half a second after its window; a traffic that
	// ran past that leaves it a moment to write.
	const int64_t deadline =
	    std::max(t0_ns_ + int64_t(spec_.end_s * 1e9) + 1'000'000'000, now_ns() + 200'000'000);
	for (;;) {
		const int64_t left_ms = (deadline - now_ns()) / 1'000'000;
		if (left_ms <= 0)
			break;
		pollfd p = {out_fd_, POLLIN, 0};
		const int n = poll(&p, 1, int(left_ms));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		char buf[8192];
		const ssize_t r = read(out_fd_, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		text.append(buf, size_t(r));
	}
	if (text.size() == plan_.size() * sizeof(cut_record)) {
		got.resize(plan_.size());
		std::memcpy(static_cast<void *>(got.data()), text.data(), text.size());
	}
	end_child();
	return got;
}

cut_summary summarize_cuts(const std::vector<cut_record> &cuts,
			   const std::vector<socket_record> &sockets, const cut_spec &spec)
{
	cut_summary c;
	c.ran = true;
	c.seed = spec.seed;
	c.planned = spec.count;
	for (const auto &k : cuts) {
		if (k.done_us < 0) {
			c.failed++;
			if (c.first_error.empty())
				c.first_error = fmt::format(
				    "{}: {}", k.step == 1 ? "pidfd_getfd" : "setsockopt(SO_*BUF)",
				    strerror(-k.err));
			continue;
		}
		c.made++;
		(k.dir ? c.rcv : c.snd)++;
		if (k.step == 3)
			c.lock_refused++;
		else
			(k.lock ? c.lock_on : c.lock_off)++;
		const socket_record &s = sockets[size_t(k.socket)];
		c.by_mode[mode_name(s.a, s.driver)]++;
	}
	// Cuts the cutter never reported (it was killed, or wrote nothing).
	if (cuts.empty())
		c.failed = spec.count;
	return c;
}

std::string cuts_text(const cut_summary &c, const cut_spec &spec, pid_t pid)
{
	std::string out = fmt::format(
	    "cuts from outside: {} of {} made by pid {} through pidfd_getfd() (seed {}, between "
	    "{:.1f} and {:.1f} s, setsockopt() to {}): {} of SO_SNDBUF, {} of SO_RCVBUF; "
	    "SO_BUF_LOCK then 3 on {}, 0 on {}",
	    c.made, c.planned, pid, c.seed, spec.start_s, spec.end_s, spec.size, c.snd, c.rcv,
	    c.lock_on, c.lock_off);
	if (c.lock_refused)
		out += fmt::format(", refused on {} (the cut stays locked)", c.lock_refused);
	out += "; per mode:";
	for (const auto &[m, n] : c.by_mode)
		out += fmt::format(" {} {}", m, n);
	if (c.failed)
		out += fmt::format("; {} not made ({})", c.failed,
				   c.first_error.empty() ? "the cutter reported nothing"
							 : "first: " + c.first_error);
	return out;
}

} // namespace sockbuf::contract
