// SPDX-License-Identifier: MIT
#include "guard.h"

#include "buffer.h"
#include "floor_registry.h"
#include "probe.h"
#include "validate.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <netinet/tcp.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace sockbuf::guard
{

namespace
{

constexpr unsigned int known_flags = SOCKBUF_GUARD_ALLOW_FORCE | SOCKBUF_GUARD_RESERVE_MEM |
				     SOCKBUF_GUARD_NO_DIAG | SOCKBUF_GUARD_RUN_IN_CHILD;
constexpr unsigned int min_interval_us = 100, max_interval_us = 60'000'000;

int64_t now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Full sockets only: request and time-wait minisocks have no inode and no
// buffers of their own.
uint32_t full_socket_states()
{
	return ~((1u << TCP_SYN_RECV) | (1u << TCP_TIME_WAIT) | (1u << 12 /* NEW_SYN_RECV */));
}

bool interval_ok(unsigned int us)
{
	return us >= min_interval_us && us <= max_interval_us;
}

} // namespace

int check_flags(unsigned int flags)
{
	return (flags & ~known_flags) ? -EINVAL : 0;
}

floor_guard::floor_guard(unsigned int flags) : flags_(flags), owner_(getpid())
{
	if (flags_ & SOCKBUF_GUARD_NO_DIAG)
		diag_err_ = -EPERM;
	else
		diag_err_ = diag_.open();
	stats_.diag_err = diag_err_;
}

floor_guard::~floor_guard()
{
	stop();
	for (const entry &e : entries_)
		registry::withdraw(e.inode, registry::by_guard);
	if (timer_fd_ >= 0)
		::close(timer_fd_);
}

int floor_guard::add(int fd, const struct sockbuf_floor &floor)
{
	int ret = validate::sizes(floor.snd, floor.rcv, false);
	if (ret == 0)
		ret = validate::tcp_socket(fd);
	if (ret < 0)
		return ret;
	struct sockbuf_probe_info info;
	ret = probe::get(&info, false);
	if (ret < 0)
		return ret;
	const bool may_force =
	    (flags_ & SOCKBUF_GUARD_ALLOW_FORCE) && (info.features & SOCKBUF_FEAT_FORCE);
	if (!may_force && ((info.sndbuf_max > 0 && floor.snd > info.sndbuf_max) ||
			   (info.rcvbuf_max > 0 && floor.rcv > info.rcvbuf_max)))
		return -ERANGE;
	int64_t inode = diag::socket_inode(fd);
	if (inode < 0)
		return int(inode);

	std::lock_guard<std::mutex> lock(mu_);
	if (by_inode_.count(uint32_t(inode)))
		return -EEXIST;
	try {
		entries_.push_back({fd, uint32_t(inode), floor});
		by_inode_.emplace(uint32_t(inode), entries_.size() - 1);
	} catch (const std::bad_alloc &) {
		if (entries_.size() > by_inode_.size())
			entries_.pop_back();
		return -ENOMEM;
	}
	stats_.sockets = int(entries_.size());
	registry::publish(inode, floor.snd, floor.rcv, registry::by_guard);
	return 0;
}

int floor_guard::remove(int fd)
{
	std::lock_guard<std::mutex> lock(mu_);
	for (size_t i = 0; i < entries_.size(); i++) {
		if (entries_[i].fd != fd)
			continue;
		registry::withdraw(entries_[i].inode, registry::by_guard);
		entries_.erase(entries_.begin() + long(i));
		rebuild_index();
		stats_.sockets = int(entries_.size());
		return 0;
	}
	return -ENOENT;
}

void floor_guard::rebuild_index()
{
	by_inode_.clear();
	for (size_t i = 0; i < entries_.size(); i++)
		by_inode_.emplace(entries_[i].inode, i);
}

bool floor_guard::use_dump()
{
	if (diag_err_ != 0 || entries_.empty())
		return false;
	if (source_ns_[1] == 0)
		return true; // measure the dump first
	if (source_ns_[0] == 0)
		return false; // then getsockopt
	const bool dump_cheaper = source_ns_[1] < source_ns_[0];
	const int64_t chosen = dump_cheaper ? source_ns_[1] : source_ns_[0];
	const int64_t other = dump_cheaper ? source_ns_[0] : source_ns_[1];
	const uint64_t retime = other < 4 * chosen ? 64 : 4096;
	return passes_ % retime == 0 ? !dump_cheaper : dump_cheaper;
}

// One dump of this namespace's TCP sockets; only the guarded ones are kept.
void floor_guard::read_sizes_from_dump()
{
	diag::filter f;
	f.states = full_socket_states();
	f.tcp_info = false;
	int ret = diag_.each(f, [this](const diag::socket_info &s) {
		auto it = by_inode_.find(s.inode);
		if (it != by_inode_.end())
			now_[it->second] = {s.sndbuf, s.rcvbuf};
	});
	if (ret < 0) {
		// Partly filled sizes are still true; the rest fall back.
		diag_err_ = ret;
		stats_.diag_err = ret;
	}
}

// getsockopt on the fd, after checking it still names the socket added.
bool floor_guard::read_sizes_one(const entry &e, sizes *out)
{
	if (diag::socket_inode(e.fd) != int64_t(e.inode))
		return false; // closed, or the number now names another file
	int v = 0;
	if (e.floor.snd && buffer::get_size(e.fd, buffer::snd, &v) == 0)
		out->snd = v;
	if (e.floor.rcv && buffer::get_size(e.fd, buffer::rcv, &v) == 0)
		out->rcv = v;
	return true;
}

void floor_guard::check_one(const entry &e, const sizes &now, bool from_dump,
			    struct sockbuf_guard_report *p, bool *gone)
{
	const int64_t size[2] = {now.snd, now.rcv};
	const int want[2] = {e.floor.snd, e.floor.rcv};
	int below = 0;
	for (int i = 0; i < 2; i++) {
		if (want[i] == 0 || size[i] < 0 || size[i] >= want[i])
			continue;
		below++;
		p->worst_depth = std::max(p->worst_depth, int(want[i] - size[i]));
	}
	if (below == 0)
		return;
	p->below += below;
	// The dump speaks of the socket, not of this fd: make sure the fd
	// still names it before changing anything through it.
	if (from_dump && diag::socket_inode(e.fd) != int64_t(e.inode)) {
		*gone = true;
		return;
	}
	unsigned int flags = SOCKBUF_F_FALLBACK_DEFAULT;
	if (flags_ & SOCKBUF_GUARD_ALLOW_FORCE)
		flags |= SOCKBUF_F_ALLOW_FORCE;
	if (flags_ & SOCKBUF_GUARD_RESERVE_MEM)
		flags |= SOCKBUF_F_RESERVE_MEM;
	struct sockbuf_report rep;
	if (sockbuf_restore_floor(e.fd, &e.floor, flags, &rep) < 0) {
		p->errors++;
		return;
	}
	if (e.floor.snd && rep.snd.strategy != SOCKBUF_STRAT_HELD &&
	    rep.snd.strategy != SOCKBUF_STRAT_DEFAULT)
		p->restored++;
	if (e.floor.rcv && rep.rcv.strategy != SOCKBUF_STRAT_HELD &&
	    rep.rcv.strategy != SOCKBUF_STRAT_DEFAULT)
		p->restored++;
}

int floor_guard::pass(struct sockbuf_guard_report *out)
{
	if (!(flags_ & SOCKBUF_GUARD_RUN_IN_CHILD) && getpid() != owner_)
		return -ECHILD;
	struct sockbuf_guard_report p = {};
	std::lock_guard<std::mutex> lock(mu_);
	int64_t t0 = now_ns();
	if (timer_fd_ >= 0) {
		uint64_t expirations;
		ssize_t n = ::read(timer_fd_, &expirations, sizeof(expirations));
		(void)n; // EAGAIN: called before the timer fired
	}
	now_.assign(entries_.size(), sizes{});
	const bool dump = use_dump();
	if (dump) {
		read_sizes_from_dump();
		p.diag = diag_err_ == 0;
	}
	std::vector<bool> gone(entries_.size(), false);
	for (size_t i = 0; i < entries_.size(); i++) {
		const entry &e = entries_[i];
		bool from_dump = now_[i].snd >= 0 || now_[i].rcv >= 0;
		if (!from_dump && !read_sizes_one(e, &now_[i])) {
			gone[i] = true;
			continue;
		}
		bool g = false;
		check_one(e, now_[i], from_dump, &p, &g);
		gone[i] = g;
	}
	p.sockets = int(entries_.size());
	for (size_t i = 0; i < entries_.size(); i++)
		if (gone[i])
			registry::withdraw(entries_[i].inode, registry::by_guard);
	size_t kept = 0;
	for (size_t i = 0; i < entries_.size(); i++)
		if (!gone[i])
			entries_[kept++] = entries_[i];
	p.removed = int(entries_.size() - kept);
	if (p.removed) {
		entries_.resize(kept);
		rebuild_index();
	}
	p.duration_ns = now_ns() - t0;
	source_ns_[dump ? 1 : 0] = p.duration_ns;
	passes_++;

	stats_.passes++;
	stats_.below += uint64_t(p.below);
	stats_.restored += uint64_t(p.restored);
	stats_.errors += uint64_t(p.errors);
	stats_.removed += uint64_t(p.removed);
	stats_.sockets = int(entries_.size());
	stats_.worst_depth = std::max(stats_.worst_depth, p.worst_depth);
	stats_.last_pass_ns = p.duration_ns;
	stats_.max_pass_ns = std::max(stats_.max_pass_ns, p.duration_ns);
	stats_.total_pass_ns += p.duration_ns;
	if (out)
		*out = p;
	return 0;
}

void floor_guard::run_thread()
{
	std::unique_lock<std::mutex> lock(run_mu_);
	while (!stopping_) {
		const auto interval = std::chrono::microseconds(interval_us_);
		lock.unlock();
		auto begin = std::chrono::steady_clock::now();
		pass(nullptr);
		auto end = std::chrono::steady_clock::now();
		lock.lock();
		// Never more than half a core: rest at least as long as the
		// pass took.
		auto next = std::max(begin + interval, end + (end - begin));
		run_cv_.wait_until(lock, next, [this] { return stopping_; });
	}
}

int floor_guard::start(unsigned int interval_us)
{
	if (!interval_ok(interval_us))
		return -EINVAL;
	std::lock_guard<std::mutex> lock(run_mu_);
	if (thread_.joinable() || interval_us_)
		return -EALREADY;
	stopping_ = false;
	interval_us_ = interval_us;
	try {
		thread_ = std::thread([this] { run_thread(); });
	} catch (const std::system_error &) {
		interval_us_ = 0;
		return -EAGAIN;
	}
	return 0;
}

int floor_guard::stop()
{
	std::thread t;
	{
		std::lock_guard<std::mutex> lock(run_mu_);
		if (!thread_.joinable())
			return -ENOENT;
		stopping_ = true;
		t = std::move(thread_);
	}
	run_cv_.notify_all();
	t.join();
	std::lock_guard<std::mutex> lock(run_mu_);
	interval_us_ = 0;
	return 0;
}

int floor_guard::timerfd(unsigned int interval_us)
{
	if (!interval_ok(interval_us))
		return -EINVAL;
	std::lock_guard<std::mutex> run_lock(run_mu_);
	if (thread_.joinable() || interval_us_)
		return -EALREADY;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct itimerspec its = {};
	its.it_interval.tv_sec = interval_us / 1'000'000;
	its.it_interval.tv_nsec = long(interval_us % 1'000'000) * 1000;
	its.it_value = its.it_interval;
	if (timerfd_settime(fd, 0, &its, nullptr) < 0) {
		int err = -errno;
		::close(fd);
		return err;
	}
	interval_us_ = interval_us;
	std::lock_guard<std::mutex> lock(mu_);
	timer_fd_ = fd;
	return fd;
}

void floor_guard::stats(struct sockbuf_guard_totals *out)
{
	unsigned int interval;
	{
		std::lock_guard<std::mutex> run_lock(run_mu_);
		interval = interval_us_;
	}
	std::lock_guard<std::mutex> lock(mu_);
	*out = stats_;
	out->interval_us = interval;
}

} // namespace sockbuf::guard
