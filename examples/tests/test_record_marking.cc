// SPDX-License-Identifier: MIT
// Record marking over a real socket pair: markers, fragments, both marker
// modes, and the limits a server needs against a hostile peer.
#include "../rpc/record_marking.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{

struct socket_pair {
	int fd[2] = {-1, -1};
	socket_pair()
	{
		// Local stream sockets: the record layer only needs a byte stream.
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd) < 0)
			fd[0] = fd[1] = -1;
	}
	~socket_pair()
	{
		for (int f : fd)
			if (f >= 0)
				close(f);
	}
};

std::vector<char> bytes(size_t n)
{
	std::vector<char> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = static_cast<char>(i * 31 + 7);
	return v;
}

} // namespace

TEST(RecordMarking, MarkerEncodesLengthAndLastBit)
{
	EXPECT_EQ(ntohl(rpc::encode_marker(100, true)), 0x80000064u);
	EXPECT_EQ(ntohl(rpc::encode_marker(100, false)), 100u);
	size_t len;
	bool last;
	rpc::decode_marker(htonl(0x80001000u), &len, &last);
	EXPECT_EQ(len, 4096u);
	EXPECT_TRUE(last);
}

class RoundTrip : public ::testing::TestWithParam<std::tuple<rpc::marker_mode, size_t>>
{
};

TEST_P(RoundTrip, RecordArrivesWhole)
{
	socket_pair sp;
	ASSERT_GE(sp.fd[0], 0);
	auto head = bytes(12);
	auto body = bytes(70000);
	rpc::send_options opt;
	opt.marker = std::get<0>(GetParam());
	opt.fragment = std::get<1>(GetParam());
	std::thread tx([&] {
		iovec parts[2] = {{head.data(), head.size()}, {body.data(), body.size()}};
		try {
			rpc::send_record(sp.fd[0], parts, 2, opt);
		} catch (const std::exception &) {
			// The receiving side failed and hung up; it reports.
		}
		shutdown(sp.fd[0], SHUT_WR);
	});
	std::vector<char> got;
	bool whole = false;
	try {
		whole = rpc::recv_record(sp.fd[1], got, 1 << 20);
	} catch (const std::exception &e) {
		ADD_FAILURE() << e.what();
		shutdown(sp.fd[1], SHUT_RDWR); // unblocks the sender
	}
	tx.join();
	ASSERT_TRUE(whole);
	std::vector<char> want = head;
	want.insert(want.end(), body.begin(), body.end());
	EXPECT_EQ(got, want);
	EXPECT_FALSE(rpc::recv_record(sp.fd[1], got, 1 << 20)); // clean EOF
}

INSTANTIATE_TEST_SUITE_P(
    Modes, RoundTrip,
    ::testing::Combine(::testing::Values(rpc::marker_mode::separate, rpc::marker_mode::combined),
		       ::testing::Values(size_t{0}, size_t{1000}, size_t{12}, size_t{65536})));

TEST(RecordMarking, FragmentsOnTheWireAsRequested)
{
	socket_pair sp;
	ASSERT_GE(sp.fd[0], 0);
	auto body = bytes(2500);
	rpc::send_options opt;
	opt.fragment = 1000;
	iovec part = {body.data(), body.size()};
	rpc::send_record(sp.fd[0], &part, 1, opt);
	shutdown(sp.fd[0], SHUT_WR);
	std::vector<char> wire(2500 + 3 * 4 + 1);
	size_t got = 0;
	for (ssize_t n; (n = read(sp.fd[1], wire.data() + got, wire.size() - got)) > 0;)
		got += static_cast<size_t>(n);
	ASSERT_EQ(got, 2500u + 12u);
	uint32_t m[3];
	memcpy(&m[0], wire.data(), 4);
	memcpy(&m[1], wire.data() + 4 + 1000, 4);
	memcpy(&m[2], wire.data() + 8 + 2000, 4);
	EXPECT_EQ(ntohl(m[0]), 1000u);
	EXPECT_EQ(ntohl(m[1]), 1000u);
	EXPECT_EQ(ntohl(m[2]), 0x80000000u | 500u);
}

TEST(RecordMarking, OversizedRecordIsRefused)
{
	socket_pair sp;
	ASSERT_GE(sp.fd[0], 0);
	uint32_t marker = rpc::encode_marker(5000, true);
	ASSERT_EQ(write(sp.fd[0], &marker, 4), 4);
	std::vector<char> got;
	EXPECT_THROW(rpc::recv_record(sp.fd[1], got, 4096), std::runtime_error);
}

TEST(RecordMarking, EmptyFragmentFloodIsRefused)
{
	socket_pair sp;
	ASSERT_GE(sp.fd[0], 0);
	uint32_t marker = rpc::encode_marker(0, false);
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(write(sp.fd[0], &marker, 4), 4);
	std::vector<char> got;
	EXPECT_THROW(rpc::recv_record(sp.fd[1], got, 4096), std::runtime_error);
}

TEST(RecordMarking, EofInsideARecordThrows)
{
	socket_pair sp;
	ASSERT_GE(sp.fd[0], 0);
	uint32_t marker = rpc::encode_marker(100, false);
	ASSERT_EQ(write(sp.fd[0], &marker, 4), 4);
	ASSERT_EQ(write(sp.fd[0], "0123456789", 10), 10);
	shutdown(sp.fd[0], SHUT_WR);
	std::vector<char> got;
	EXPECT_THROW(rpc::recv_record(sp.fd[1], got, 4096), std::runtime_error);
}
