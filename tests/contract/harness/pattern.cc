// SPDX-License-Identifier: MIT
#include "pattern.h"

#include <cstring>

namespace sockbuf::contract
{

namespace
{

inline uint64_t word_at(uint64_t salt, uint64_t index)
{
	return (index * 0x9E3779B97F4A7C15ull) ^ salt;
}

inline uint8_t byte_at(uint64_t salt, uint64_t off)
{
	return uint8_t(word_at(salt, off >> 3) >> ((off & 7) * 8));
}

} // namespace

void pattern_fill(uint64_t salt, uint64_t off, uint8_t *p, size_t n)
{
	while (n && (off & 7)) {
		*p++ = byte_at(salt, off++);
		n--;
	}
	while (n >= 8) {
		uint64_t w = word_at(salt, off >> 3);
		memcpy(p, &w, 8); // little endian: byte k of the word is offset 8i+k
		p += 8;
		off += 8;
		n -= 8;
	}
	while (n) {
		*p++ = byte_at(salt, off++);
		n--;
	}
}

int64_t pattern_check(uint64_t salt, uint64_t off, const uint8_t *p, size_t n, uint8_t *scratch)
{
	pattern_fill(salt, off, scratch, n);
	if (memcmp(p, scratch, n) == 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (p[i] != scratch[i])
			return int64_t(i);
	return -1;
}

} // namespace sockbuf::contract
