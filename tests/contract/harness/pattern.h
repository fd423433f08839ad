// SPDX-License-Identifier: MIT
// The byte stream every scenario sends: each 8-byte word holds its own
// index (mixed with a per-flow salt), so a lost, repeated or reordered
// byte shows up as a mismatch at a known offset.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sockbuf::contract
{

// Fills @p with the stream bytes [@off, @off + @n) of the flow @salt.
void pattern_fill(uint64_t salt, uint64_t off, uint8_t *p, size_t n);

// Checks @p against the stream at @off.  Returns -1 when all match, else
// the index in @p of the first wrong byte.  @scratch holds @n bytes.
int64_t pattern_check(uint64_t salt, uint64_t off, const uint8_t *p, size_t n, uint8_t *scratch);

} // namespace sockbuf::contract
