// SPDX-License-Identifier: MIT
#include "engine.h"

#include "clock.h"
#include "diag.h"
#include "pattern.h"

#include <fmt/core.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace sockbuf::contract
{

namespace
{

// Past the drain's base, how often the readers look at what the
// unfinished flows' connections still hold, and how often the progress
// line says so.
constexpr int64_t look_every_ns = 100'000'000;
constexpr int64_t progress_every_ns = 5'000'000'000;

bool flow_done(const flow &f)
{
	return f.failed || (f.snd_closed && f.eof);
}

// What the unfinished flows of one traffic thread still hold, as last
// seen past the drain's base.
struct drain_look {
	bool looked = false, finished = false;
	uint64_t flows = 0, snd_queued = 0, rcv_queued = 0;
	int backoff = 0;
	uint32_t rto_us = 0;
	int64_t end_ns = 0; // when the thread's loop ended
};

// The traffic threads' looks, read by await_traffic() for the progress
// line.
struct drain_watch {
	std::mutex mu;
	std::condition_variable cv;
	std::vector<drain_look> slots;
};

drain_look look_at(const std::vector<flow *> &flows)
{
	drain_look l;
	l.looked = true;
	for (const flow *f : flows) {
		if (flow_done(*f))
			continue;
		held_bytes h = held_by(*f);
		if (!h.holds())
			continue;
		l.flows++;
		l.snd_queued += h.snd_queued;
		l.rcv_queued += h.rcv_queued;
		l.backoff = std::max(l.backoff, h.backoff);
		l.rto_us = std::max(l.rto_us, h.rto_us);
	}
	return l;
}

uint64_t next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
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
		f.done_ns = now;
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

void run_subset(std::vector<flow *> flows, int64_t deadline, const drain_limits &lim,
		integrity *tally, drain_watch *watch, size_t slot)
{
	uint32_t biggest = 1;
	for (auto *f : flows)
		biggest = std::max({biggest, f->sp.chunk, f->rp.chunk});
	std::vector<uint8_t> sbuf(biggest), rbuf(biggest), scratch(biggest);
	std::vector<pollfd> pfds;
	std::vector<std::pair<flow *, bool>> who; // flow, is_sender
	for (auto *f : flows)
		f->burst_left = f->sp.burst_bytes;

	const int64_t base_end = deadline + lim.base_ns, cap_end = deadline + lim.cap_ns;
	int64_t next_look = 0;
	for (;;) {
		int64_t now = now_ns();
		if (now > cap_end)
			break;
		// Past the base, wait only while bytes are still on their way.
		if (now > base_end && now >= next_look) {
			drain_look l = look_at(flows);
			{
				std::lock_guard<std::mutex> g(watch->mu);
				watch->slots[slot] = l;
			}
			if (l.flows == 0)
				break;
			next_look = now + look_every_ns;
		}
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
	std::lock_guard<std::mutex> g(watch->mu);
	watch->slots[slot].finished = true;
	watch->slots[slot].end_ns = now_ns();
	watch->cv.notify_all();
}

// Waits for the traffic threads; past the drain's base, says every few
// seconds what the drain still waits for, and when it ended.
void await_traffic(drain_watch *watch, int64_t deadline, const drain_limits &lim)
{
	int64_t next_line = deadline + lim.base_ns;
	bool said = false;
	std::unique_lock<std::mutex> g(watch->mu);
	for (;;) {
		if (std::all_of(watch->slots.begin(), watch->slots.end(),
				[](const drain_look &l) { return l.finished; }))
			break;
		int64_t now = now_ns();
		drain_look sum;
		for (const auto &l : watch->slots) {
			if (l.finished || !l.looked)
				continue;
			sum.looked = true;
			sum.flows += l.flows;
			sum.snd_queued += l.snd_queued;
			sum.rcv_queued += l.rcv_queued;
			sum.backoff = std::max(sum.backoff, l.backoff);
			sum.rto_us = std::max(sum.rto_us, l.rto_us);
		}
		if (lim.progress && now >= next_line && sum.flows) {
			fmt::print(lim.progress,
				   "sockbuf-contract: drain {:.1f} s past the deadline: {} flows "
				   "unfinished, their senders holding {} bytes (their readers {}), "
				   "retransmit backoff up to {}, RTO up to {:.1f} s; waiting for "
				   "them, at most {:.1f} s\n",
				   double(now - deadline) / 1e9, sum.flows, sum.snd_queued,
				   sum.rcv_queued, sum.backoff, double(sum.rto_us) / 1e6,
				   double(lim.cap_ns) / 1e9);
			fflush(lim.progress);
			said = true;
			next_line = now + progress_every_ns;
		}
		int64_t wait = std::clamp<int64_t>(next_line - now, 1'000'000, look_every_ns);
		watch->cv.wait_for(g, std::chrono::nanoseconds(wait));
	}
	if (said) {
		int64_t end = 0;
		for (const auto &l : watch->slots)
			end = std::max(end, l.end_ns);
		fmt::print(lim.progress,
			   "sockbuf-contract: drain ended {:.1f} s past the deadline\n",
			   double(end - deadline) / 1e9);
		fflush(lim.progress);
	}
}

} // namespace

bool held_bytes::state_has_fin() const
{
	return state == TCP_FIN_WAIT1 || state == TCP_CLOSING || state == TCP_LAST_ACK;
}

held_bytes held_by(const flow &f)
{
	held_bytes h;
	struct tcp_info ti = {};
	socklen_t len = sizeof(ti);
	if (getsockopt(f.snd_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
		h.state = ti.tcpi_state;
		h.backoff = ti.tcpi_backoff;
		h.rto_us = ti.tcpi_rto;
		h.alive = h.state != TCP_CLOSE && h.state != TCP_TIME_WAIT && h.state != TCP_LISTEN;
	}
	// SIOCOUTQ: write_seq - snd_una, bytes unsent or unacknowledged plus
	// one for a FIN not yet acknowledged.
	int q = 0;
	if (h.alive && ioctl(f.snd_fd, SIOCOUTQ, &q) == 0 && q > 0)
		h.snd_queued = uint64_t(q) - (h.state_has_fin() ? 1 : 0);
	q = 0;
	if (ioctl(f.rcv_fd, SIOCINQ, &q) == 0 && q > 0)
		h.rcv_queued = uint64_t(q);
	return h;
}

void run_flows(std::vector<flow> &flows, int threads, int64_t deadline_ns, integrity *out,
	       const drain_limits &lim)
{
	threads = std::max(1, std::min<int>(threads, int(flows.size())));
	std::vector<std::vector<flow *>> parts(static_cast<size_t>(threads));
	for (size_t i = 0; i < flows.size(); i++) {
		flows[i].rng = flows[i].salt | 1;
		parts[i % size_t(threads)].push_back(&flows[i]);
	}
	std::vector<integrity> tallies(static_cast<size_t>(threads));
	drain_watch watch;
	watch.slots.resize(size_t(threads));
	std::vector<std::thread> pool;
	pool.reserve(size_t(threads));
	for (int t = 0; t < threads; t++)
		pool.emplace_back([&, t] {
			pthread_setname_np(pthread_self(), "traffic");
			run_subset(parts[size_t(t)], deadline_ns, lim, &tallies[size_t(t)], &watch,
				   size_t(t));
		});
	await_traffic(&watch, deadline_ns, lim);
	for (auto &t : pool)
		t.join();
	// The sockets stay open (the caller closes them after this returns):
	// what a sender still holds is judged below, not dropped by a close.
	for (auto &t : tallies)
		out->corrupt += t.corrupt;
	int64_t end = 0;
	for (const auto &l : watch.slots)
		end = std::max(end, l.end_ns);
	const double drain = double(std::max<int64_t>(0, end - deadline_ns)) / 1e9;
	out->drain_s = std::max(out->drain_s, drain);
	out->drain_base_s = double(lim.base_ns) / 1e9;
	out->drain_cap_s = double(lim.cap_ns) / 1e9;
	for (auto &f : flows) {
		out->flows++;
		out->bytes_sent += f.sent;
		out->bytes_verified += f.received;
		if (!f.error.empty()) {
			out->errors.push_back(f.error);
			continue;
		}
		if (f.snd_closed && f.eof && f.received == f.sent) {
			if (f.done_ns > deadline_ns + lim.base_ns)
				out->late_flows++;
			continue;
		}
		held_bytes h = held_by(f);
		if (h.holds()) {
			// Not lost: the connection still holds the missing bytes
			// (and retransmits them); the drain's limit came first.
			out->unfinished_flows++;
			out->unfinished.push_back(fmt::format(
			    "flow unfinished at the drain limit ({:.1f} s past the deadline): "
			    "{} of {} bytes received, {} bytes still queued by the sender "
			    "({}), {} in the reader's queue, retransmit backoff {} (RTO "
			    "{:.1f} s)",
			    drain, f.received, f.sent, h.snd_queued, diag::state_name(h.state),
			    h.rcv_queued, h.backoff, double(h.rto_us) / 1e6));
			continue;
		}
		out->short_flows++;
		out->errors.push_back(
		    fmt::format("flow ended with {} of {} bytes received; its connection holds "
				"none of the rest (sender {})",
				f.received, f.sent, h.state ? diag::state_name(h.state) : "gone"));
	}
}

} // namespace sockbuf::contract
