// SPDX-License-Identifier: MIT
// The example RPC program: NFS-like WRITE (payload in the call) and READ
// (payload in the reply).  All header words are big-endian, as in XDR.
#pragma once

#include <cstdint>

namespace rpc
{

enum op_code : uint32_t { op_write = 1, op_read = 2 };
enum status_code : uint32_t { status_ok = 0, status_garbage = 1 };

// Call: header then call_len payload bytes.
struct call_header {
	uint32_t xid;
	uint32_t op;
	uint32_t call_len;  // payload bytes in this call
	uint32_t reply_len; // payload bytes wanted in the reply
};

// Reply: header then len payload bytes.
struct reply_header {
	uint32_t xid;
	uint32_t status;
	uint32_t len;
};

// Pattern salts: a call's payload never verifies as a reply's.
constexpr uint64_t salt_call = 0xca11;
constexpr uint64_t salt_reply = 0x4e91;

// Largest payload either side accepts (the 1 MB requests).
constexpr uint32_t max_payload = 1u << 20;

} // namespace rpc
