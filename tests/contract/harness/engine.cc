// SPDX-License-Identifier: MIT
#include "engine.h"

#include "clock.h"
#include "pattern.h"

#include <fmt/core.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace sockbuf::contract
{

namespace
{

constexpr int64_t drain_ns = 5'000'000'000;

uint64_t next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

bool flow_done(const flow &f)
{
	return f.failed || (f.snd_closed && f.eof);
}

void do_send(flow &f, std::vector<uint8_t> &buf, int64_t now, int64_t deadline)
{
	if (now >= deadline && f.to_send > f.sent)
		f.to_send = f.sent; // time bound: stop, deliver what is out
	uint64_t left = f.to_send - f.sent;
	if (left == 0) {
		shutdown(f.snd_fd, SHUT_WR);
		f.snd_closed = true;
		return;
	}
	size_t n = size_t(std::min<uint64_t>(left, f.sp.chunk));
	if (f.sp.burst_bytes)
		n = size_t(std::min<uint64_t>(n, f.burst_left));
	pattern_fill(f.salt, f.sent, buf.data(), n);
	ssize_t r = send(f.snd_fd, buf.data(), n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (r < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			f.failed = true;
			f.error = fmt::format("send: {}", strerror(errno));
		}
		return;
	}
	f.sent += uint64_t(r);
	if (f.sp.burst_bytes) {
		f.burst_left -= uint64_t(r);
		if (f.burst_left == 0) {
			f.burst_left = f.sp.burst_bytes;
			f.next_send_ns = now + int64_t(f.sp.burst_gap_us) * 1000;
		}
	}
}

void do_read(flow &f, std::vector<uint8_t> &buf, std::vector<uint8_t> &scratch, int64_t now,
	     integrity *tally)
{
	ssize_t r = recv(f.rcv_fd, buf.data(), f.rp.chunk, MSG_DONTWAIT);
	if (r < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			f.failed = true;
			f.error = fmt::format("recv: {}", strerror(errno));
		}
		return;
	}
	if (r == 0) {
		f.eof = true;
		return;
	}
	int64_t bad = pattern_check(f.salt, f.received, buf.data(), size_t(r), scratch.data());
	if (bad >= 0) {
		f.failed = true;
		f.error = fmt::format("byte {} differs from what was sent", f.received + bad);
		tally->corrupt++;
		return;
	}
	f.received += uint64_t(r);
	int64_t gap = int64_t(f.rp.gap_us) * 1000;
	if (f.rp.gap_jitter_us)
		gap += int64_t(next_random(&f.rng) % (uint64_t(f.rp.gap_jitter_us) * 1000));
	if (f.rp.stop_every) {
		f.since_stop += uint64_t(r);
		if (f.since_stop >= f.rp.stop_every) {
			f.since_stop = 0;
			gap += int64_t(f.rp.stop_us) * 1000;
		}
	}
	if (gap)
		f.next_read_ns = now + gap;
}

void run_subset(std::vector<flow *> flows, int64_t deadline, integrity *tally)
{
	uint32_t biggest = 1;
	for (auto *f : flows)
		biggest = std::max({biggest, f->sp.chunk, f->rp.chunk});
	std::vector<uint8_t> sbuf(biggest), rbuf(biggest), scratch(biggest);
	std::vector<pollfd> pfds;
	std::vector<std::pair<flow *, bool>> who; // flow, is_sender
	for (auto *f : flows)
		f->burst_left = f->sp.burst_bytes;

	for (;;) {
		int64_t now = now_ns();
		if (now > deadline + drain_ns)
			break;
		pfds.clear();
		who.clear();
		int64_t wake = now + 10'000'000;
		for (auto *f : flows) {
			if (flow_done(*f))
				continue;
			if (!f->snd_closed) {
				if (now >= f->next_send_ns) {
					pfds.push_back({f->snd_fd, POLLOUT, 0});
					who.push_back({f, true});
				} else {
					wake = std::min(wake, f->next_send_ns);
				}
			}
			if (!f->eof) {
				if (now >= f->next_read_ns) {
					pfds.push_back({f->rcv_fd, POLLIN, 0});
					who.push_back({f, false});
				} else {
					wake = std::min(wake, f->next_read_ns);
				}
			}
		}
		bool all_done =
		    std::all_of(flows.begin(), flows.end(), [](flow *f) { return flow_done(*f); });
		if (all_done)
			break;
		if (deadline > now)
			wake = std::min(wake, deadline);
		int timeout_ms = int(std::max<int64_t>(0, (wake - now + 999'999) / 1'000'000));
		int n = poll(pfds.data(), pfds.size(), timeout_ms);
		if (n < 0 && errno != EINTR)
			break;
		now = now_ns();
		for (size_t i = 0; i < pfds.size() && n > 0; i++) {
			if (!pfds[i].revents)
				continue;
			flow &f = *who[i].first;
			if (who[i].second)
				do_send(f, sbuf, now, deadline);
			else
				do_read(f, rbuf, scratch, now, tally);
		}
		// Senders whose time is up close even when the socket is full.
		if (now >= deadline)
			for (auto *f : flows)
				if (!f->snd_closed && !f->failed && f->to_send > f->sent) {
					f->to_send = f->sent;
					shutdown(f->snd_fd, SHUT_WR);
					f->snd_closed = true;
				}
	}
}

} // namespace

void run_flows(std::vector<flow> &flows, int threads, int64_t deadline_ns, integrity *out)
{
	threads = std::max(1, std::min<int>(threads, int(flows.size())));
	std::vector<std::vector<flow *>> parts(static_cast<size_t>(threads));
	for (size_t i = 0; i < flows.size(); i++) {
		flows[i].rng = flows[i].salt | 1;
		parts[i % size_t(threads)].push_back(&flows[i]);
	}
	std::vector<integrity> tallies(static_cast<size_t>(threads));
	std::vector<std::thread> pool;
	pool.reserve(size_t(threads));
	for (int t = 0; t < threads; t++)
		pool.emplace_back([&, t] {
			pthread_setname_np(pthread_self(), "traffic");
			run_subset(parts[size_t(t)], deadline_ns, &tallies[size_t(t)]);
		});
	for (auto &t : pool)
		t.join();
	for (auto &t : tallies)
		out->corrupt += t.corrupt;
	for (auto &f : flows) {
		out->flows++;
		out->bytes_sent += f.sent;
		out->bytes_verified += f.received;
		if (!f.error.empty())
			out->errors.push_back(f.error);
		else if (!(f.snd_closed && f.eof) || f.received != f.sent) {
			out->short_flows++;
			out->errors.push_back(fmt::format("flow ended with {} of {} bytes received",
							  f.received, f.sent));
		}
	}
}

} // namespace sockbuf::contract
