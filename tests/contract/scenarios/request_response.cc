// SPDX-License-Identifier: MIT
// Request-response like RDS over TCP: 16 connections, each with its own
// client and server thread, 100 KB requests answered by 100 KB responses.
// Both directions carry verified pattern streams.
#include "clock.h"
#include "pattern.h"
#include "scenario.h"

#include <fmt/core.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

namespace sockbuf::contract
{

namespace
{

constexpr size_t message = 100 * 1000;
constexpr int connections = 16;

struct stream {
	uint64_t salt, off = 0;
};

// Sends one message of @s; false on error.
bool send_message(int fd, stream *s, std::vector<uint8_t> &buf)
{
	pattern_fill(s->salt, s->off, buf.data(), message);
	size_t done = 0;
	while (done < message) {
		ssize_t n = send(fd, buf.data() + done, message - done, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		done += size_t(n);
	}
	s->off += message;
	return true;
}

// Receives one message; 1 ok, 0 EOF before any byte, -1 error, -2 corrupt.
int recv_message(int fd, stream *s, std::vector<uint8_t> &buf, std::vector<uint8_t> &scratch)
{
	size_t done = 0;
	while (done < message) {
		ssize_t n = recv(fd, buf.data() + done, message - done, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			return done == 0 ? 0 : -1;
		done += size_t(n);
	}
	if (pattern_check(s->salt, s->off, buf.data(), message, scratch.data()) >= 0)
		return -2;
	s->off += message;
	return 1;
}

void set_timeouts(int fd)
{
	timeval tv = {5, 0}; // bounds every blocking call
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

} // namespace

scenario_spec scenario_request_response()
{
	return {
	    "request_response", "16 threads, 100 KB requests and responses (RDS-like)",
	    [](const profile &p, scenario_plan *plan) {
		    auto all = arms_times(4);
		    plan->arms.assign(all.begin(), all.begin() + connections);
		    plan->sizes = {131072, 131072, false};
		    plan->seconds = p.quick ? 3 : 20;
		    plan->needs_growth = true;
		    int rounds = p.quick ? 150 : 3000;
		    plan->traffic = [rounds](connection_set &set, int64_t deadline,
					     integrity *data) {
			    std::mutex mu;
			    std::vector<std::thread> threads;
			    for (size_t i = 0; i < set.conns.size(); i++) {
				    int cfd = set.sockets[set.conns[i].client].fd;
				    int sfd = set.sockets[set.conns[i].server].fd;
				    set_timeouts(cfd);
				    set_timeouts(sfd);
				    uint64_t salt = 0x7c00000000000000ull + i * 0x9e37ull;
				    threads.emplace_back([=, &mu] {
					    // Server: answer until EOF.
					    std::vector<uint8_t> buf(message), scratch(message);
					    stream in{salt}, out{salt ^ 0xffff};
					    int r;
					    std::string err;
					    while ((r = recv_message(sfd, &in, buf, scratch)) == 1)
						    if (!send_message(sfd, &out, buf)) {
							    err = "server send failed";
							    break;
						    }
					    if (r < 0)
						    err = r == -2 ? "request corrupt"
								  : "server recv failed";
					    // No shutdown here: both ends closed would
					    // take the sockets out of the tables
					    // inet_diag reads after the traffic.
					    std::lock_guard<std::mutex> lock(mu);
					    if (!err.empty())
						    data->errors.push_back(err);
					    if (r == -2)
						    data->corrupt++;
				    });
				    threads.emplace_back([=, &mu] {
					    std::vector<uint8_t> buf(message), scratch(message);
					    stream out{salt}, in{salt ^ 0xffff};
					    std::string err;
					    int done = 0;
					    for (; done < rounds && now_ns() < deadline; done++) {
						    if (!send_message(cfd, &out, buf)) {
							    err = "client send failed";
							    break;
						    }
						    int r = recv_message(cfd, &in, buf, scratch);
						    if (r != 1) {
							    err = r == -2 ? "response corrupt"
									  : "client recv failed";
							    break;
						    }
					    }
					    shutdown(cfd, SHUT_WR);
					    std::lock_guard<std::mutex> lock(mu);
					    data->flows++;
					    data->bytes_sent += out.off + in.off;
					    data->bytes_verified += out.off + in.off;
					    if (!err.empty())
						    data->errors.push_back(err);
				    });
			    }
			    for (auto &t : threads)
				    t.join();
		    };
		    plan->notes.push_back(
			fmt::format("{} connections, {} byte messages", connections, message));
		    return std::string();
	    }};
}

} // namespace sockbuf::contract
