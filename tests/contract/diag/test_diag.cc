// SPDX-License-Identifier: MIT
// sockbuf_diag against sockets this test opened: every value the dump
// reports must equal what getsockopt says about the same socket.
#include "diag.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace
{

using sockbuf::diag::socket_info;

struct fd_guard {
	int fd = -1;
	~fd_guard()
	{
		if (fd >= 0)
			close(fd);
	}
};

int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, level, name, &v, &len) < 0)
		return -errno;
	return v;
}

// A connected loopback pair plus its listener; the listener has a locked
// 64 KiB receive buffer so its size differs from the defaults.
struct pair {
	fd_guard listener, client, server;
	uint16_t port = 0;

	void open()
	{
		listener.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ASSERT_GE(listener.fd, 0);
		int small = 32768;
		ASSERT_EQ(setsockopt(listener.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
		sockaddr_in a = {};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ASSERT_EQ(bind(listener.fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
		socklen_t alen = sizeof(a);
		ASSERT_EQ(getsockname(listener.fd, reinterpret_cast<sockaddr *>(&a), &alen), 0);
		port = ntohs(a.sin_port);
		ASSERT_EQ(listen(listener.fd, 4), 0);
		client.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ASSERT_GE(client.fd, 0);
		ASSERT_EQ(connect(client.fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
		server.fd = accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
		ASSERT_GE(server.fd, 0);
	}
};

const socket_info *find_inode(const std::vector<socket_info> &v, int fd)
{
	int64_t ino = sockbuf::diag::socket_inode(fd);
	for (const auto &si : v)
		if (int64_t(si.inode) == ino)
			return &si;
	return nullptr;
}

void expect_matches_kernel(const socket_info &si, int fd)
{
	EXPECT_EQ(si.sndbuf, get_int(fd, SOL_SOCKET, SO_SNDBUF));
	EXPECT_EQ(si.rcvbuf, get_int(fd, SOL_SOCKET, SO_RCVBUF));
	struct tcp_info ti = {};
	socklen_t len = sizeof(ti);
	ASSERT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
	EXPECT_EQ(si.state, ti.tcpi_state);
	ASSERT_TRUE(si.has_tcp_info);
	if (ti.tcpi_options & TCPI_OPT_WSCALE) {
		EXPECT_EQ(si.snd_wscale, ti.tcpi_snd_wscale);
		EXPECT_EQ(si.rcv_wscale, ti.tcpi_rcv_wscale);
	}
}

TEST(Diag, DumpFindsOwnSocketsWithKernelValues)
{
	pair p;
	ASSERT_NO_FATAL_FAILURE(p.open());
	std::vector<socket_info> v;
	sockbuf::diag::filter f;
	f.any_port = p.port;
	int ret = sockbuf::diag::dump(&v, f);
	if (ret == -EPROTONOSUPPORT || ret == -ENOENT)
		GTEST_SKIP() << "inet_diag not available: " << strerror(-ret);
	ASSERT_EQ(ret, 0);
	// The dump is of the whole network namespace: another socket may use
	// the same port number (a TIME_WAIT left by an earlier connection
	// whose ephemeral port the listener now has, as seen in a fresh
	// Debian root sharing the host's namespace).  Each of ours must be
	// there exactly once.
	ASSERT_GE(v.size(), 3u) << "listener, client and accepted socket";
	for (int own : {p.listener.fd, p.client.fd, p.server.fd}) {
		const int64_t ino = sockbuf::diag::socket_inode(own);
		size_t seen = 0;
		for (const auto &si : v)
			seen += int64_t(si.inode) == ino;
		EXPECT_EQ(seen, 1u) << "fd " << own << " (inode " << ino << ") in the dump";
	}

	const socket_info *lis = find_inode(v, p.listener.fd);
	const socket_info *cli = find_inode(v, p.client.fd);
	const socket_info *srv = find_inode(v, p.server.fd);
	ASSERT_TRUE(lis && cli && srv);
	EXPECT_EQ(lis->state, TCP_LISTEN);
	EXPECT_EQ(cli->state, TCP_ESTABLISHED);
	EXPECT_EQ(srv->state, TCP_ESTABLISHED);
	EXPECT_EQ(lis->rcvbuf, 65536) << "32768 doubled by the kernel";
	EXPECT_EQ(srv->rcvbuf, 65536) << "accepted socket inherits the listener";
	EXPECT_EQ(cli->local.port, srv->remote.port);
	EXPECT_EQ(cli->remote.port, p.port);
	EXPECT_EQ(srv->local.port, p.port);
	EXPECT_EQ(cli->local.str().rfind("127.0.0.1:", 0), 0u) << cli->local.str();
	EXPECT_EQ(srv->rcv_wscale, cli->snd_wscale);
	EXPECT_NE(cli->cookie, 0u);
	expect_matches_kernel(*cli, p.client.fd);
	expect_matches_kernel(*srv, p.server.fd);
	expect_matches_kernel(*lis, p.listener.fd);
}

TEST(Diag, ByteCountersAndQueuesFollowTraffic)
{
	pair p;
	ASSERT_NO_FATAL_FAILURE(p.open());
	char data[10000];
	memset(data, 'x', sizeof(data));
	ASSERT_EQ(send(p.client.fd, data, sizeof(data), 0), ssize_t(sizeof(data)));
	// The bytes sit unread in the server's receive queue.  The ACK may
	// trail the send by a moment: dump again (bounded) until it is in.
	sockbuf::diag::session s;
	std::vector<socket_info> v;
	sockbuf::diag::filter f;
	f.any_port = p.port;
	f.states = 1u << TCP_ESTABLISHED;
	const socket_info *cli = nullptr;
	for (int attempt = 0; attempt < 10000; attempt++) {
		int ret = s.dump(&v, f);
		if (ret == -EPROTONOSUPPORT || ret == -ENOENT)
			GTEST_SKIP() << "inet_diag not available: " << strerror(-ret);
		ASSERT_EQ(ret, 0);
		cli = find_inode(v, p.client.fd);
		if (cli && cli->bytes_acked == sizeof(data) + 1)
			break;
	}
	ASSERT_EQ(v.size(), 2u) << "state filter leaves the listener out";
	const socket_info *srv = find_inode(v, p.server.fd);
	ASSERT_TRUE(srv && cli);
	EXPECT_EQ(srv->bytes_received, sizeof(data));
	EXPECT_GT(srv->rmem_alloc, 0) << "unread data is charged to the receiver";
	EXPECT_EQ(cli->bytes_acked, sizeof(data) + 1) << "bytes_acked counts the SYN";

	// A second dump on the same session works and sees the same sockets.
	ASSERT_EQ(s.dump(&v, f), 0);
	EXPECT_EQ(v.size(), 2u);
}

TEST(Diag, QueryAsksAgainAboutSocketsADumpFound)
{
	pair p;
	ASSERT_NO_FATAL_FAILURE(p.open());
	sockbuf::diag::session s;
	std::vector<socket_info> found;
	sockbuf::diag::filter f;
	f.any_port = p.port;
	f.states = 1u << TCP_ESTABLISHED;
	int ret = s.dump(&found, f);
	if (ret == -EPROTONOSUPPORT || ret == -ENOENT)
		GTEST_SKIP() << "inet_diag not available: " << strerror(-ret);
	ASSERT_EQ(ret, 0);
	ASSERT_EQ(found.size(), 2u);

	// Change a size after the dump: the query must see the new value.
	int want = 50000;
	ASSERT_EQ(setsockopt(p.client.fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)), 0);
	std::vector<socket_info> again;
	ASSERT_EQ(s.query(found, f, [&](const socket_info &si) { again.push_back(si); }), 0);
	ASSERT_EQ(again.size(), 2u);
	const socket_info *cli = find_inode(again, p.client.fd);
	ASSERT_TRUE(cli);
	EXPECT_EQ(cli->sndbuf, 100000);
	expect_matches_kernel(*cli, p.client.fd);

	// A closed socket is skipped, not an error.
	p.server.fd = (close(p.server.fd), -1);
	p.client.fd = (close(p.client.fd), -1);
	again.clear();
	ASSERT_EQ(s.query(found, f, [&](const socket_info &si) { again.push_back(si); }), 0);
	for (const auto &si : again)
		EXPECT_NE(si.state, TCP_ESTABLISHED) << "only closing states may remain";
}

TEST(Diag, OwnersMapInodesToThisProcess)
{
	pair p;
	ASSERT_NO_FATAL_FAILURE(p.open());
	std::unordered_map<uint32_t, std::vector<sockbuf::diag::owner>> owners;
	ASSERT_EQ(sockbuf::diag::socket_owners(&owners), 0);
	int64_t ino = sockbuf::diag::socket_inode(p.server.fd);
	ASSERT_GT(ino, 0);
	auto it = owners.find(uint32_t(ino));
	ASSERT_NE(it, owners.end());
	bool found = false;
	for (auto o : it->second)
		found |= o.pid == getpid() && o.fd == p.server.fd;
	EXPECT_TRUE(found);
	EXPECT_EQ(sockbuf::diag::socket_inode(-1), -EBADF);
}

TEST(Diag, StateNames)
{
	EXPECT_STREQ(sockbuf::diag::state_name(TCP_ESTABLISHED), "ESTABLISHED");
	EXPECT_STREQ(sockbuf::diag::state_name(TCP_LISTEN), "LISTEN");
	EXPECT_STREQ(sockbuf::diag::state_name(99), "?");
}

} // namespace
