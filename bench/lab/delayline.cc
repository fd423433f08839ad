// SPDX-License-Identifier: MIT
// sockbuf-delayline: a user-space delay line for hosts without sch_netem.
// Holds every packet an NFQUEUE rule hands it for --delay-ms, then accepts
// it.  Run one inside each network namespace with the rule on the
// *receive* side (prerouting): holding packets on the send side collapses
// TCP throughput (TCP small queues), holding them on arrival gives a
// steady RTT of the two delays added.  The delay is constant, so packets
// leave in arrival order and one batch verdict releases all that are due.
// The libc network headers first: linux/netfilter.h pulls in linux/in.h,
// which clashes with netinet/in.h when it comes first.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <poll.h>
#include <string>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>

namespace
{

struct held {
	uint64_t due_ns;
	uint32_t id;
};

struct line_state {
	uint64_t delay_ns = 0;
	std::deque<held> queue;
	uint64_t packets = 0;
	size_t max_held = 0;
};

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int on_packet(nfq_q_handle *, nfgenmsg *, nfq_data *nfa, void *data)
{
	auto *st = static_cast<line_state *>(data);
	nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	if (!ph)
		return 0;
	st->queue.push_back({now_ns() + st->delay_ns, ntohl(ph->packet_id)});
	st->packets++;
	st->max_held = std::max(st->max_held, st->queue.size());
	return 0;
}

// Accepts every packet that is due; ids grow in arrival order, so one
// batch verdict on the last due id covers all of them.
void release_due(nfq_q_handle *qh, line_state &st, bool all)
{
	const uint64_t now = now_ns();
	bool any = false;
	uint32_t last = 0;
	while (!st.queue.empty() && (all || st.queue.front().due_ns <= now)) {
		last = st.queue.front().id;
		st.queue.pop_front();
		any = true;
	}
	if (any)
		nfq_set_verdict_batch(qh, last, NF_ACCEPT);
}

long arg_num(const char *arg, const char *name, long min, long max)
{
	size_t n = std::strlen(name);
	char *end = nullptr;
	long v = std::strtol(arg + n, &end, 10);
	if (*end || v < min || v > max) {
		std::fprintf(stderr, "sockbuf-delayline: bad %s%s\n", name, arg + n);
		std::exit(2);
	}
	return v;
}

} // namespace

int main(int argc, char **argv)
{
	long queue_num = 0, delay_us = -1, seconds = 3600;
	for (int i = 1; i < argc; i++) {
		if (std::strncmp(argv[i], "--queue=", 8) == 0)
			queue_num = arg_num(argv[i], "--queue=", 0, 65535);
		else if (std::strncmp(argv[i], "--delay-us=", 11) == 0)
			delay_us = arg_num(argv[i], "--delay-us=", 0, 10000000);
		else if (std::strncmp(argv[i], "--seconds=", 10) == 0)
			seconds = arg_num(argv[i], "--seconds=", 1, 86400);
		else {
			std::fprintf(stderr, "usage: sockbuf-delayline --delay-us=N [--queue=N] "
					     "[--seconds=N]\n");
			return 2;
		}
	}
	if (delay_us < 0) {
		std::fprintf(stderr, "sockbuf-delayline: --delay-us is required\n");
		return 2;
	}
	line_state st;
	st.delay_ns = static_cast<uint64_t>(delay_us) * 1000;

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, nullptr);
	int sigfd = signalfd(-1, &set, 0);

	nfq_handle *h = nfq_open();
	if (!h) {
		std::perror("sockbuf-delayline: nfq_open");
		return 1;
	}
	nfq_q_handle *qh = nfq_create_queue(h, static_cast<uint16_t>(queue_num), on_packet, &st);
	if (!qh) {
		std::perror("sockbuf-delayline: nfq_create_queue");
		return 1;
	}
	// Metadata only: the verdict needs the id, not the bytes.
	if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, 200000) < 0) {
		std::perror("sockbuf-delayline: queue setup");
		return 1;
	}
	// Take GSO packets whole instead of having the kernel segment them.
	nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
	int fd = nfq_fd(h);
	nfnl_rcvbufsiz(nfq_nfnlh(h), 64 << 20);
	int one = 1;
	setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
	std::printf("sockbuf-delayline: queue %ld, delay %ld us\n", queue_num, delay_us);
	std::fflush(stdout);

	static char buf[1 << 16];
	const uint64_t end = now_ns() + static_cast<uint64_t>(seconds) * 1000000000ull;
	for (;;) {
		const uint64_t now = now_ns();
		if (now >= end)
			break;
		uint64_t wait_ns = 100000000; // idle: look at the clock every 100 ms
		if (!st.queue.empty())
			wait_ns = st.queue.front().due_ns > now ? st.queue.front().due_ns - now : 0;
		timespec ts = {static_cast<time_t>(wait_ns / 1000000000ull),
			       static_cast<long>(wait_ns % 1000000000ull)};
		pollfd pfd[2] = {{fd, POLLIN, 0}, {sigfd, POLLIN, 0}};
		int n = ppoll(pfd, 2, &ts, nullptr);
		if (n < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (pfd[0].revents & POLLIN) {
			for (;;) {
				ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
				if (got <= 0)
					break;
				nfq_handle_packet(h, buf, static_cast<int>(got));
			}
		}
		release_due(qh, st, false);
	}
	release_due(qh, st, true);
	std::fprintf(stderr, "sockbuf-delayline: %llu packets, at most %zu held\n",
		     static_cast<unsigned long long>(st.packets), st.max_held);
	nfq_destroy_queue(qh);
	nfq_close(h);
	return 0;
}
