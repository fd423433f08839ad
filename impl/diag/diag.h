// SPDX-License-Identifier: MIT
// inet_diag (NETLINK_SOCK_DIAG): every TCP socket of the caller's network
// namespace with its buffer sizes (SK_MEMINFO) and tcp_info (RTT, window
// scales), as the kernel sees them, without touching the sockets.
//
//   std::vector<sockbuf::diag::socket_info> v;
//   if (int err = sockbuf::diag::dump(&v, {}); err < 0) ...
//
// A `session` keeps the netlink socket and its buffer open for repeated
// dumps (a sampler at 1 kHz); dump() opens one for a single call.
// inet_diag does not carry the SO_BUF_LOCK bits: read those with
// getsockopt on a socket you hold (or a pidfd_getfd duplicate).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace sockbuf::diag
{

// One end of a connection: AF_INET or AF_INET6, address in network order.
struct endpoint {
	int family = 0;
	uint8_t addr[16] = {};
	uint16_t port = 0;	 // host order
	std::string str() const; // "198.18.10.1:5001", "[::1]:5001"
};

struct socket_info {
	int family = 0;	    // AF_INET or AF_INET6
	int state = 0;	    // TCP_ESTABLISHED, TCP_LISTEN, ... (netinet/tcp.h)
	uint32_t inode = 0; // matches fstat(fd).st_ino and /proc/PID/fd links
	uint32_t uid = 0;
	uint64_t cookie = 0; // the kernel's socket cookie (SO_COOKIE)
	endpoint local, remote;

	// SK_MEMINFO; -1 when the kernel did not send the attribute.
	int64_t sndbuf = -1;	  // sk_sndbuf: what getsockopt(SO_SNDBUF) returns
	int64_t rcvbuf = -1;	  // sk_rcvbuf: what getsockopt(SO_RCVBUF) returns
	int64_t wmem_queued = -1; // bytes queued for sending, incl. overhead
	int64_t rmem_alloc = -1;  // bytes held by the receive queue
	int64_t wmem_alloc = -1;
	int64_t fwd_alloc = -1;
	int64_t drops = -1;

	// INET_DIAG_INFO (struct tcp_info); has_tcp_info false without it.
	bool has_tcp_info = false;
	uint32_t rtt_us = 0, rttvar_us = 0;
	int snd_wscale = -1, rcv_wscale = -1; // -1 until negotiated
	uint8_t options = 0;		      // TCPI_OPT_* bits
	uint32_t snd_cwnd = 0;
	uint32_t rcv_space = 0;
	uint64_t bytes_acked = 0, bytes_received = 0;
};

// What to dump.  Ports are host order, 0 matches any.
struct filter {
	int family = 0;		 // 0 = IPv4 and IPv6
	uint32_t states = ~0u;	 // bit (1 << TCP_STATE) per state wanted
	uint16_t local_port = 0; // either end of the connection ...
	uint16_t remote_port = 0;
	uint16_t any_port = 0; // ... or a port on either side
	bool tcp_info = true;  // also ask for INET_DIAG_INFO
};

// A netlink socket kept open for repeated dumps.  Not thread-safe: one
// session per thread.
class session
{
public:
	session() = default;
	~session();
	session(const session &) = delete;
	session &operator=(const session &) = delete;

	// Opens the NETLINK_SOCK_DIAG socket.  0 or -errno.
	int open();
	bool is_open() const { return fd_ >= 0; }

	// In a forked child: the socket is the parent's (a dump here would
	// read the parent's answers), so the child's copy is closed and the
	// session is closed; open() makes the child's own.  Nothing is freed:
	// the fork may have caught a dump mid-call in a thread the child lacks.
	void after_fork();

	// Calls @fn for each socket that matches @f, in kernel order.
	// 0 or -errno (-EPROTONOSUPPORT when inet_diag is missing).
	int each(const filter &f, const std::function<void(const socket_info &)> &fn);

	// Replaces @out's contents with the matching sockets.  0 or -errno.
	int dump(std::vector<socket_info> *out, const filter &f);

	// Asks again about sockets a dump found, by address, port and cookie:
	// one hash lookup each instead of a walk over every socket of the
	// host, so it suits sampling at a high rate.  Requests go out in
	// batches; @fn sees each socket still there (gone ones are skipped).
	// Uses f.tcp_info only.  0 or -errno.
	int query(const std::vector<socket_info> &which, const filter &f,
		  const std::function<void(const socket_info &)> &fn);

private:
	int dump_family(int family, const filter &f,
			const std::function<void(const socket_info &)> &fn);
	int query_batch(const socket_info *which, size_t n, const filter &f,
			const std::function<void(const socket_info &)> &fn);
	int fd_ = -1;
	uint32_t seq_ = 0;
	std::vector<char> buf_;
};

// One-shot: opens a session, dumps, closes.  0 or -errno.
int dump(std::vector<socket_info> *out, const filter &f = {});

// Who holds each socket: inode -> (pid, fd) pairs, read from /proc/*/fd.
// Processes that cannot be read (permissions, exited) are left out.
struct owner {
	int pid;
	int fd;
};
int socket_owners(std::unordered_map<uint32_t, std::vector<owner>> *out);

// Calls @fn(fd, inode) for each socket in the descriptor table of @pid
// (0: this process, through /proc/self/fd).  0, or -errno when the table
// cannot be read (gone, not ours to read, no /proc).
int each_socket_fd(int pid, const std::function<void(int fd, uint32_t inode)> &fn);

// The inode of a socket fd you hold (fstat), or -errno.
int64_t socket_inode(int fd);

// "ESTABLISHED", "LISTEN", ... for a TCP state number.
const char *state_name(int state);

} // namespace sockbuf::diag
