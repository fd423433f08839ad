// SPDX-License-Identifier: MIT
// Bulk transfer between two network namespaces.  setns() changes only the
// calling thread's namespace, so the receiver and the sender each live in a
// thread of their own; sockets keep the namespace they were made in, and
// the sampling thread reads them through the shared file table.
#include "transfer.h"
#include "track.h"

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace sockbuf::kcheck
{

namespace
{

using clock = std::chrono::steady_clock;

void apply_setup(int fd, const transfer_params &p, socket_track &t)
{
	if (p.setup == setup::untouched)
		return;
	sockbuf_report r{};
	int rc;
	if (p.setup == setup::initial_force)
		rc = sockbuf_set_initial_bufsize(
		    fd, p.size, p.size, SOCKBUF_F_ALLOW_FORCE | SOCKBUF_F_FALLBACK_DEFAULT, &r);
	else if (p.setup == setup::initial)
		// Where the kernel has no unlocked way (5.10, send side), keep
		// its own size: that fallback is what this run exercises.
		rc =
		    sockbuf_set_initial_bufsize(fd, p.size, p.size, SOCKBUF_F_FALLBACK_DEFAULT, &r);
	else
		rc = sockbuf_lock_bufsize(fd, p.size, p.size, 0, &r);
	t.setup_err = rc < 0 ? rc : 0;
	t.strategy_snd = sockbuf_strategy_name(r.snd.strategy);
	t.strategy_rcv = sockbuf_strategy_name(r.rcv.strategy);
	t.report_flags = r.flags;
	if (p.setup != setup::locked)
		sockbuf_report_floor(&r, &t.floor);
}

void restore_if_below(int fd, socket_track &t)
{
	if (!t.floor.snd && !t.floor.rcv)
		return;
	if (sockbuf_check_floor(fd, &t.floor, nullptr) <= 0)
		return;
	int rc = sockbuf_restore_floor(fd, &t.floor, SOCKBUF_F_FALLBACK_DEFAULT, nullptr);
	t.restores++;
	if (rc < 0)
		t.restore_err = rc;
	sockbuf_state s{};
	if (sockbuf_get_state(fd, &s) == 0 &&
	    (t.min_snd_after_restore == 0 || s.sndbuf < t.min_snd_after_restore))
		t.min_snd_after_restore = s.sndbuf;
}

} // namespace

int enter_netns(const std::string &path)
{
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	return rc;
}

// Short timeouts so that blocking calls come back to look at the clock.
void set_io_timeouts(int fd)
{
	timeval tv{0, 200 * 1000};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

sockaddr_in server_sockaddr(const transfer_params &p)
{
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(static_cast<uint16_t>(p.port));
	inet_pton(AF_INET, p.server_addr.c_str(), &a.sin_addr);
	return a;
}

transfer_result run_transfer(const transfer_params &p)
{
	transfer_result res;
	const auto t0 = clock::now();
	const auto deadline = t0 + p.max_time;
	std::atomic<bool> stop{false};
	std::promise<int> listening, accepted_fd, client_fd;
	auto accepted_f = accepted_fd.get_future();
	auto client_f = client_fd.get_future();
	std::atomic<long long> received{0};

	std::thread receiver([&] {
		int err = enter_netns(p.server_ns);
		int ls = err ? -1 : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (ls < 0) {
			listening.set_value(err ? err : -errno);
			accepted_fd.set_value(-1);
			return;
		}
		int one = 1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		apply_setup(ls, p, res.receiver);
		auto a = server_sockaddr(p);
		if (bind(ls, reinterpret_cast<sockaddr *>(&a), sizeof(a)) || listen(ls, 1)) {
			listening.set_value(-errno);
			accepted_fd.set_value(-1);
			close(ls);
			return;
		}
		listening.set_value(0);
		set_io_timeouts(ls);
		int fd = -1;
		while (fd < 0 && clock::now() < deadline && !stop)
			fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
		close(ls);
		if (fd >= 0)
			sockbuf_get_state(fd, &res.receiver.at_setup);
		accepted_fd.set_value(fd);
		if (fd < 0)
			return;
		set_io_timeouts(fd);
		std::vector<char> buf(256 << 10);
		while (clock::now() < deadline + std::chrono::seconds(2)) {
			ssize_t n = recv(fd, buf.data(), buf.size(), 0);
			if (n == 0)
				break;
			if (n > 0)
				received += n;
			else if (errno != EAGAIN && errno != EINTR)
				break;
		}
		stop = true;
	});

	int lerr = listening.get_future().get();
	std::thread sender;
	if (lerr == 0) {
		sender = std::thread([&] {
			int err = enter_netns(p.client_ns);
			int fd = err ? -1 : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd < 0) {
				client_fd.set_value(err ? err : -errno);
				return;
			}
			apply_setup(fd, p, res.sender);
			auto a = server_sockaddr(p);
			if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a))) {
				int e = -errno;
				close(fd);
				client_fd.set_value(e);
				return;
			}
			set_io_timeouts(fd);
			sockbuf_get_state(fd, &res.sender.at_setup);
			client_fd.set_value(fd);
			std::vector<char> buf(128 << 10, 'x');
			long long sent = 0;
			while (sent < p.max_bytes && clock::now() < deadline && !stop) {
				size_t want = static_cast<size_t>(
				    std::min<long long>(buf.size(), p.max_bytes - sent));
				ssize_t n = send(fd, buf.data(), want, MSG_NOSIGNAL);
				if (n > 0)
					sent += n;
				else if (n < 0 && errno != EAGAIN && errno != EINTR)
					break;
			}
			shutdown(fd, SHUT_WR);
		});
	} else {
		client_fd.set_value(lerr);
	}

	int cfd = client_f.get();
	int afd = cfd >= 0 ? accepted_f.get() : -1;
	if (cfd < 0 || afd < 0) {
		stop = true;
		res.err = cfd < 0 ? cfd : -ETIMEDOUT;
		res.what = lerr ? "listen" : cfd < 0 ? "connect" : "accept";
	} else {
		// The listener's floor is the accepted socket's floor.
		bool first = true;
		auto next_series = clock::now();
		while (!stop && clock::now() < deadline + std::chrono::seconds(2)) {
			const auto now = clock::now();
			const long ms = static_cast<long>(
			    std::chrono::duration_cast<std::chrono::milliseconds>(now - t0)
				.count());
			const bool series = now >= next_series;
			if (series)
				next_series = now + p.series_every;
			track_sample(cfd, res.sender, first, ms, series);
			track_sample(afd, res.receiver, first, ms, series);
			first = false;
			if (p.restore_floor)
				restore_if_below(cfd, res.sender);
			if (p.on_tick)
				p.on_tick(std::chrono::duration_cast<std::chrono::milliseconds>(
				    clock::now() - t0));
			std::this_thread::sleep_for(p.sample_every);
		}
		stop = true;
	}
	if (sender.joinable())
		sender.join();
	receiver.join();
	res.bytes = received;
	res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
	if (cfd >= 0)
		close(cfd);
	if (afd >= 0)
		close(afd);
	return res;
}

} // namespace sockbuf::kcheck
