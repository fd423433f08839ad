// SPDX-License-Identifier: MIT
// ONC RPC record marking over TCP (RFC 5531 section 11): a record is sent
// as one or more fragments, each behind a 4-byte big-endian header whose top
// bit marks the last fragment and whose low 31 bits give its length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/uio.h>
#include <vector>

namespace rpc
{

constexpr uint32_t last_fragment_bit = 0x80000000u;
constexpr size_t max_fragment = 0x7fffffffu;

// How the 4-byte marker goes out: as its own send() with MSG_MORE (what
// SUNRPC's server did for years), or in the same sendmsg() as the payload.
enum class marker_mode { separate, combined };

struct send_options {
	marker_mode marker = marker_mode::combined;
	bool cork = false;   // TCP_CORK on around the whole record
	size_t fragment = 0; // largest fragment; 0: one fragment
};

// The header word for a fragment of @len bytes.
uint32_t encode_marker(size_t len, bool last);
// Length and last bit of a received header word (in network order).
void decode_marker(uint32_t wire, size_t *len, bool *last);

// Sends @parts (concatenated) as one record.  Throws on error.
void send_record(int fd, const iovec *parts, int nparts, const send_options &opt);

// Receives one record into @out (resized to fit).  false on a clean EOF
// before the record starts; throws on a short read, an oversized record
// (more than @max_len bytes) or a flood of empty non-final fragments.
bool recv_record(int fd, std::vector<char> &out, size_t max_len);

} // namespace rpc
