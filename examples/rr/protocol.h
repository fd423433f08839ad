// SPDX-License-Identifier: MIT
// rr messages: a fixed header then len payload bytes.  The server answers
// each request with a reply of the same size and sequence number, in order.
#pragma once

#include <cstdint>

namespace rr
{

constexpr uint32_t magic_request = 0x52445351; // "RDSQ"
constexpr uint32_t magic_reply = 0x52445350;   // "RDSP"
constexpr uint64_t salt_request = 0x7e9;
constexpr uint64_t salt_reply = 0x5e9;
constexpr uint32_t max_message = 4u << 20;

// Host byte order: both ends run on the same machine or architecture.
struct header {
	uint32_t magic;
	uint32_t len;
	uint64_t seq; // (connection << 40) | request number: unique per run
};

} // namespace rr
