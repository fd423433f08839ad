// SPDX-License-Identifier: MIT
#include "record_marking.h"

#include "../common/net.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdexcept>
#include <sys/socket.h>

namespace rpc
{

namespace
{

// Sends the iovecs completely, advancing over partial sends.
void sendmsg_full(int fd, std::vector<iovec> iov, int flags)
{
	size_t first = 0;
	while (first < iov.size()) {
		msghdr msg{};
		msg.msg_iov = iov.data() + first;
		msg.msg_iovlen = iov.size() - first;
		ssize_t n = ::sendmsg(fd, &msg, flags | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			throw std::runtime_error(std::string("sendmsg: ") + std::strerror(errno));
		}
		auto left = static_cast<size_t>(n);
		while (first < iov.size() && left >= iov[first].iov_len) {
			left -= iov[first].iov_len;
			first++;
		}
		if (left) {
			iov[first].iov_base = static_cast<char *>(iov[first].iov_base) + left;
			iov[first].iov_len -= left;
		}
	}
}

// The iovecs covering bytes [off, off + len) of the concatenated parts.
std::vector<iovec> slice(const iovec *parts, int nparts, size_t off, size_t len)
{
	std::vector<iovec> out;
	for (int i = 0; i < nparts && len > 0; i++) {
		if (off >= parts[i].iov_len) {
			off -= parts[i].iov_len;
			continue;
		}
		size_t take = std::min(len, parts[i].iov_len - off);
		out.push_back({static_cast<char *>(parts[i].iov_base) + off, take});
		len -= take;
		off = 0;
	}
	return out;
}

void set_cork(int fd, int on)
{
	if (setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on)) < 0)
		throw std::runtime_error(std::string("TCP_CORK: ") + std::strerror(errno));
}

} // namespace

uint32_t encode_marker(size_t len, bool last)
{
	return htonl(static_cast<uint32_t>(len) | (last ? last_fragment_bit : 0));
}

void decode_marker(uint32_t wire, size_t *len, bool *last)
{
	uint32_t host = ntohl(wire);
	*last = (host & last_fragment_bit) != 0;
	*len = host & ~last_fragment_bit;
}

void send_record(int fd, const iovec *parts, int nparts, const send_options &opt)
{
	size_t total = 0;
	for (int i = 0; i < nparts; i++)
		total += parts[i].iov_len;
	const size_t frag = opt.fragment ? std::min(opt.fragment, max_fragment) : max_fragment;
	if (opt.cork)
		set_cork(fd, 1);
	size_t off = 0;
	do {
		size_t len = std::min(frag, total - off);
		bool last = off + len == total;
		uint32_t marker = encode_marker(len, last);
		std::vector<iovec> iov = slice(parts, nparts, off, len);
		if (opt.marker == marker_mode::separate) {
			examples::write_full(fd, &marker, sizeof(marker), MSG_MORE);
			sendmsg_full(fd, std::move(iov), last ? 0 : MSG_MORE);
		} else {
			iov.insert(iov.begin(), iovec{&marker, sizeof(marker)});
			sendmsg_full(fd, std::move(iov), last ? 0 : MSG_MORE);
		}
		off += len;
	} while (off < total);
	if (opt.cork)
		set_cork(fd, 0);
}

bool recv_record(int fd, std::vector<char> &out, size_t max_len)
{
	out.clear();
	// Non-empty fragments are bounded by max_len; empty non-final ones
	// are not, so a peer could keep a reader here for ever: cap them.
	constexpr int max_empty_fragments = 64;
	int empty = 0;
	for (bool first = true;; first = false) {
		uint32_t wire;
		if (!examples::read_full(fd, &wire, sizeof(wire))) {
			if (first)
				return false;
			throw std::runtime_error("connection closed inside a record");
		}
		size_t len;
		bool last;
		decode_marker(wire, &len, &last);
		if (len > max_len - out.size())
			throw std::runtime_error("record longer than " + std::to_string(max_len));
		if (len == 0 && !last && ++empty > max_empty_fragments)
			throw std::runtime_error("too many empty fragments in one record");
		size_t at = out.size();
		out.resize(at + len);
		if (len && !examples::read_full(fd, out.data() + at, len))
			throw std::runtime_error("connection closed inside a fragment");
		if (last)
			return true;
	}
}

} // namespace rpc
