// SPDX-License-Identifier: MIT
// The sender runs in a forked process inside the memory group; this
// process keeps the receiver (a thread), the sampler and the squeeze.  The
// fork happens while this process has no other thread (the listener is
// made by a thread that has ended), so the sender starts from a consistent
// copy and may use the library and the allocator freely.
#include "memcg_run.h"

#include "memcg.h"
#include "pattern.h"
#include "track.h"

#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef SO_RESERVE_MEM
#define SO_RESERVE_MEM 73
#endif

namespace sockbuf::kcheck
{

namespace
{

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t stream_salt = 0x6d656d6367; // "memcg"
constexpr int ctl_timeout_ms = 10000;	       // any step of the other side

// Sender to checker, once its socket is connected (or could not be).
struct setup_msg {
	int err;       // -errno, 0 when connected
	int stage;     // where err happened: index into stage_names
	int setup_err; // -errno of the arm's setup call
	int strategy_snd, strategy_rcv;
	uint32_t report_flags;
	int reserve_err;
	sockbuf_floor floor;
	int unlock_err;
	uint32_t probe_features, probe_known;
	int mlock_err, oom_adj_err;
};
const char *const stage_names[] = {"sender netns", "sender socket", "sender connect"};

// Sender to checker, at the end.
struct done_msg {
	long long sent;
	int send_err;
	int guard_err;
	long long guard_passes, guard_below, guard_restored;
	long long guard_max_pass_us;
};

int ctl_send(int ctl, const void *msg, size_t len, int fd = -1)
{
	iovec iov{const_cast<void *>(msg), len};
	msghdr m{};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
	if (fd >= 0) {
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(ctl, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(len) ? 0 : -EPIPE;
}

// Waits up to ctl_timeout_ms for one message of exactly @len bytes; a
// passed descriptor lands in *fd.
int ctl_recv(int ctl, void *msg, size_t len, int *fd = nullptr)
{
	pollfd pf{ctl, POLLIN, 0};
	if (poll(&pf, 1, ctl_timeout_ms) != 1)
		return -ETIMEDOUT;
	iovec iov{msg, len};
	msghdr m{};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	ssize_t n = recvmsg(ctl, &m, MSG_CMSG_CLOEXEC);
	if (n != static_cast<ssize_t>(len))
		return n < 0 ? -errno : -EPIPE;
	cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (fd && c && c->cmsg_type == SCM_RIGHTS)
		std::memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}

void apply_arm(int fd, const memcg_params &p, setup_msg &m)
{
	const int size = p.base.size;
	sockbuf_report r{};
	switch (p.arm) {
	case memcg_arm::raw: {
		// setsockopt stores twice the value: ask for half, as the
		// library does, so that every arm starts at the same size.
		int half = size / 2, zero = 0;
		m.setup_err = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half)) ||
				      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &half, sizeof(half))
				  ? -errno
				  : 0;
		m.unlock_err =
		    setsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &zero, sizeof(zero)) ? -errno : 0;
		m.floor = {size, size};
		return;
	}
	case memcg_arm::initial:
	case memcg_arm::guard:
	case memcg_arm::reserve: {
		unsigned flags = SOCKBUF_F_FALLBACK_DEFAULT;
		if (p.arm == memcg_arm::reserve)
			flags |= SOCKBUF_F_RESERVE_MEM;
		int rc = sockbuf_set_initial_bufsize(fd, size, size, flags, &r);
		m.setup_err = rc < 0 ? rc : 0;
		sockbuf_report_floor(&r, &m.floor);
		break;
	}
	case memcg_arm::lock: {
		int rc = sockbuf_lock_bufsize(fd, size, size, 0, &r);
		m.setup_err = rc < 0 ? rc : 0;
		m.floor = {size, size};
		break;
	}
	}
	m.strategy_snd = r.snd.strategy;
	m.strategy_rcv = r.rcv.strategy;
	m.report_flags = r.flags;
	m.reserve_err = r.reserve_err;
}

// The forked sender: joins nothing itself (the checker moved it into the
// group before the first message), makes its socket there, connects,
// passes the socket to the checker and sends the pattern stream.
int sender_main(int ctl, const memcg_params &p)
{
	char go = 0;
	if (ctl_recv(ctl, &go, 1) < 0)
		return 1;
	setup_msg m{};
	// Out of the OOM killer's reach: a failed socket charge must come
	// back to the socket (sk_stream_moderate_sndbuf), not end the
	// process that owns it.
	{
		int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
		m.oom_adj_err = fd < 0 || write(fd, "-1000", 5) != 5 ? -errno : 0;
		if (fd >= 0)
			close(fd);
	}
	int err = enter_netns(p.base.client_ns);
	// The probe cache came with the fork, from outside the group: probe
	// again where SO_RESERVE_MEM may now be usable.
	sockbuf_probe_info info{};
	if (sockbuf_probe(&info, SOCKBUF_PROBE_FRESH) == 0) {
		m.probe_features = info.features;
		m.probe_known = info.known;
	}
	std::vector<uint8_t> buf(128 << 10);
	// Every page the sender needs is charged now, before the squeeze: a
	// page fault under it would stall the sender, not its socket.
	m.mlock_err = mlockall(MCL_CURRENT | MCL_FUTURE) ? -errno : 0;
	int fd = err ? -1 : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		m.err = err ? err : -errno;
		m.stage = err ? 0 : 1;
		ctl_send(ctl, &m, sizeof(m));
		return 1;
	}
	apply_arm(fd, p, m);
	set_io_timeouts(fd);
	auto a = server_sockaddr(p.base);
	if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a))) {
		m.err = -errno;
		m.stage = 2;
		ctl_send(ctl, &m, sizeof(m));
		return 1;
	}
	if (ctl_send(ctl, &m, sizeof(m), fd) < 0 || ctl_recv(ctl, &go, 1) < 0)
		return 1;
	done_msg d{0, 0, 0, -1, -1, -1, -1};
	// The guard arm: the library's floor guard on its own thread, started
	// before the squeeze (its stack is charged, and locked, now).
	int guard = -1;
	if (p.arm == memcg_arm::guard) {
		guard = sockbuf_guard_new(0);
		int rc = guard < 0 ? guard : sockbuf_guard_add(guard, fd, &m.floor);
		if (rc == 0)
			rc = sockbuf_guard_start(guard, 10'000);
		d.guard_err = rc < 0 ? rc : 0;
	}
	const auto deadline = clock::now() + p.base.max_time;
	while (d.sent < p.base.max_bytes && clock::now() < deadline) {
		size_t want = static_cast<size_t>(std::min<long long>(
		    static_cast<long long>(buf.size()), p.base.max_bytes - d.sent));
		contract::pattern_fill(stream_salt, static_cast<uint64_t>(d.sent), buf.data(),
				       want);
		ssize_t n = send(fd, buf.data(), want, MSG_NOSIGNAL);
		if (n > 0) {
			d.sent += n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			d.send_err = -errno;
			break;
		}
	}
	if (guard >= 0) {
		sockbuf_guard_stop(guard);
		sockbuf_guard_totals t{};
		if (sockbuf_guard_stats(guard, &t) == 0) {
			d.guard_passes = static_cast<long long>(t.passes);
			d.guard_below = static_cast<long long>(t.below);
			d.guard_restored = static_cast<long long>(t.restored);
			d.guard_max_pass_us = static_cast<long long>(t.max_pass_ns / 1000);
		}
		sockbuf_guard_destroy(guard);
	}
	shutdown(fd, SHUT_WR);
	ctl_send(ctl, &d, sizeof(d));
	close(fd);
	return 0;
}

// Listener in the receiving namespace, made by a thread of its own (setns
// changes only the calling thread) that has ended when this returns.
int make_listener(const transfer_params &p)
{
	int result = -EINVAL;
	std::thread t([&] {
		int err = enter_netns(p.server_ns);
		int ls = err ? -1 : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (ls < 0) {
			result = err ? err : -errno;
			return;
		}
		int one = 1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		auto a = server_sockaddr(p);
		if (bind(ls, reinterpret_cast<sockaddr *>(&a), sizeof(a)) || listen(ls, 1)) {
			result = -errno;
			close(ls);
			return;
		}
		result = ls;
	});
	t.join();
	return result;
}

std::string exit_text(int status)
{
	if (WIFEXITED(status))
		return "exit " + std::to_string(WEXITSTATUS(status));
	if (WIFSIGNALED(status))
		return "signal " + std::to_string(WTERMSIG(status));
	return "unknown";
}

// Waits for the sender (bounded), then kills it if it is still there.
std::string reap(pid_t pid)
{
	int status = 0;
	const auto until = clock::now() + std::chrono::seconds(5);
	while (clock::now() < until) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return exit_text(status);
		if (r < 0)
			return "lost";
		std::this_thread::sleep_for(milliseconds(20));
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return "killed after the time limit (" + exit_text(status) + ")";
}

// memory.max down to the group's memory that is not socket memory plus
// the headroom.  Written twice: the first write drains the per-CPU charge
// stock (memory the group holds but has not used), which the second
// reading no longer counts.
void apply_squeeze(const std::string &group, long long headroom, memcg_squeeze &s)
{
	const auto t = clock::now();
	for (int pass = 0; pass < 2 && !s.write_err; pass++) {
		long long cur = memcg_value(group, "memory.current");
		long long sock = memcg_stat(group, "sock");
		if (cur < 0 || sock < 0) {
			s.write_err = -ENOENT;
			break;
		}
		long long max = std::max(0LL, cur - sock) + headroom;
		if (pass == 0) {
			s.current_at_apply = cur;
			s.sock_at_apply = sock;
		} else if (max >= s.max_applied) {
			break;
		}
		s.write_err = memcg_set_max(group, max);
		if (!s.write_err)
			s.max_applied = max;
	}
	s.write_ms =
	    static_cast<long>(std::chrono::duration_cast<milliseconds>(clock::now() - t).count());
}

void sample_reserved(int fd, memcg_result &r)
{
	int v = 0;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_RESERVE_MEM, &v, &len))
		return;
	r.reserved_min = r.reserved_min < 0 ? v : std::min(r.reserved_min, v);
	r.reserved_max = std::max(r.reserved_max, v);
	if (v == 0)
		r.reserved_zero_samples++;
}

void fill_setup(const setup_msg &m, memcg_arm arm, memcg_result &r)
{
	r.setup = {m.probe_features,
		   m.probe_known,
		   m.oom_adj_err,
		   m.mlock_err,
		   m.unlock_err,
		   m.reserve_err,
		   (m.report_flags & SOCKBUF_R_RESERVED) != 0};
	r.sender.setup_err = m.setup_err;
	r.sender.floor = m.floor;
	r.sender.report_flags = m.report_flags;
	if (arm != memcg_arm::raw) {
		r.sender.strategy_snd = sockbuf_strategy_name(m.strategy_snd);
		r.sender.strategy_rcv = sockbuf_strategy_name(m.strategy_rcv);
	}
}

} // namespace

bool memcg_arm_from_name(const std::string &name, memcg_arm &out)
{
	for (auto a : {memcg_arm::raw, memcg_arm::initial, memcg_arm::reserve, memcg_arm::lock,
		       memcg_arm::guard})
		if (name == memcg_arm_name(a)) {
			out = a;
			return true;
		}
	return false;
}

const char *memcg_arm_name(memcg_arm arm)
{
	switch (arm) {
	case memcg_arm::raw:
		return "raw";
	case memcg_arm::initial:
		return "initial";
	case memcg_arm::reserve:
		return "reserve";
	case memcg_arm::lock:
		return "lock";
	case memcg_arm::guard:
		return "guard";
	}
	return "?";
}

memcg_result run_memcg_transfer(const memcg_params &p)
{
	memcg_result res;
	res.group = p.cgroup_parent + "/sbk-memcg-" + memcg_arm_name(p.arm);
	auto fail = [&](int err, const char *what) {
		res.err = err;
		res.what = what;
		return res;
	};
	if (int e = memcg_create(res.group))
		return fail(e, "cgroup mkdir");
	int ls = make_listener(p.base);
	if (ls < 0) {
		memcg_remove(res.group);
		return fail(ls, "listen");
	}
	int ctl[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl)) {
		close(ls);
		memcg_remove(res.group);
		return fail(-errno, "socketpair");
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(ctl[0]);
		close(ls);
		_exit(sender_main(ctl[1], p));
	}
	close(ctl[1]);
	int cfd = -1, afd = -1;
	auto cleanup = [&] {
		if (cfd >= 0)
			close(cfd);
		if (afd >= 0)
			close(afd);
		if (ls >= 0)
			close(ls);
		close(ctl[0]);
		memcg_set_max(res.group, -1);
		if (pid > 0 && res.sender_exit.empty())
			res.sender_exit = reap(pid);
		res.events = memcg_keyed(res.group, "memory.events");
		res.sock_end = memcg_stat(res.group, "sock");
		memcg_remove(res.group);
	};
	if (pid < 0) {
		res.err = -errno;
		res.what = "fork";
		cleanup();
		return res;
	}
	const char go = 'g';
	setup_msg m{};
	int err = memcg_add_pid(res.group, pid);
	if (!err)
		err = ctl_send(ctl[0], &go, 1);
	if (!err)
		err = ctl_recv(ctl[0], &m, sizeof(m), &cfd);
	if (!err && m.err)
		err = m.err;
	if (err) {
		res.err = err;
		res.what = m.err ? stage_names[std::clamp(m.stage, 0, 2)] : "sender control";
		fill_setup(m, p.arm, res);
		cleanup();
		return res;
	}
	fill_setup(m, p.arm, res);
	{
		pollfd pf{ls, POLLIN, 0};
		if (poll(&pf, 1, ctl_timeout_ms) == 1)
			afd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
	}
	close(ls);
	ls = -1;
	if (afd < 0 || cfd < 0) {
		res.err = afd < 0 ? -ETIMEDOUT : -EPROTO;
		res.what = afd < 0 ? "accept" : "sender socket not passed";
		cleanup();
		return res;
	}
	set_io_timeouts(afd);
	sockbuf_get_state(cfd, &res.sender.at_setup);
	sockbuf_get_state(afd, &res.receiver.at_setup);

	const auto t0 = clock::now();
	const auto deadline = t0 + p.base.max_time;
	std::atomic<bool> stop{false};
	std::atomic<long long> received{0}, corrupt_at{-1};
	std::thread receiver([&] {
		std::vector<uint8_t> buf(256 << 10), scratch(256 << 10);
		long long off = 0;
		while (clock::now() < deadline + std::chrono::seconds(2)) {
			ssize_t n = recv(afd, buf.data(), buf.size(), 0);
			if (n == 0)
				break;
			if (n < 0) {
				if (errno != EAGAIN && errno != EINTR)
					break;
				continue;
			}
			if (corrupt_at < 0) {
				int64_t bad = contract::pattern_check(
				    stream_salt, static_cast<uint64_t>(off), buf.data(),
				    static_cast<size_t>(n), scratch.data());
				if (bad >= 0)
					corrupt_at = off + bad;
			}
			off += n;
			received = off;
		}
		stop = true;
	});
	ctl_send(ctl[0], &go, 1);

	const auto quarter = p.base.max_time / 4;
	res.squeeze.from_ms = static_cast<long>(quarter.count());
	res.squeeze.until_ms = static_cast<long>((3 * quarter).count());
	bool first = true, squeezed = false, released = false;
	auto next_series = clock::now();
	while (!stop && clock::now() < deadline + std::chrono::seconds(2)) {
		const auto now = clock::now();
		const long ms =
		    static_cast<long>(std::chrono::duration_cast<milliseconds>(now - t0).count());
		const bool series = now >= next_series;
		if (series) {
			next_series = now + p.base.series_every;
			res.sock_peak = std::max(res.sock_peak, memcg_stat(res.group, "sock"));
		}
		track_sample(cfd, res.sender, first, ms, series);
		track_sample(afd, res.receiver, first, ms, series);
		sample_reserved(cfd, res);
		first = false;
		if (!squeezed && ms >= res.squeeze.from_ms) {
			squeezed = true;
			res.squeeze.applied_at_ms = ms;
			apply_squeeze(res.group, p.headroom, res.squeeze);
		} else if (squeezed && !released && ms >= res.squeeze.until_ms) {
			released = true;
			res.squeeze.released_at_ms = ms;
			memcg_set_max(res.group, -1);
		}
		std::this_thread::sleep_for(p.base.sample_every);
	}
	memcg_set_max(res.group, -1);
	stop = true;
	receiver.join();
	res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
	res.received = received;
	res.corrupt_at = corrupt_at;
	done_msg d{-1, 0, 0, -1, -1, -1, -1};
	if (ctl_recv(ctl[0], &d, sizeof(d)) == 0) {
		res.sent = d.sent;
		res.send_err = d.send_err;
		res.guard_err = d.guard_err;
		res.guard_passes = d.guard_passes;
		res.guard_below = d.guard_below;
		res.guard_restored = d.guard_restored;
		res.guard_max_pass_us = d.guard_max_pass_us;
	}
	cleanup();
	return res;
}

} // namespace sockbuf::kcheck
