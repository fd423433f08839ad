// SPDX-License-Identifier: MIT
#include "pattern.h"

#include <algorithm>
#include <cstring>

namespace examples
{

namespace
{

constexpr size_t block = 4096;

uint64_t mix(uint64_t x)
{
	// splitmix64 finaliser: neighbouring ids give unrelated stamps.
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t stamp(uint64_t id, uint64_t salt, size_t blockno)
{
	return mix(id * 0x100000001b3ull ^ salt ^ (static_cast<uint64_t>(blockno) << 40));
}

} // namespace

pattern::pattern(size_t max_len) : template_(max_len)
{
	uint64_t s = 0x5eed;
	for (size_t i = 0; i < max_len; i++) {
		s = mix(s);
		template_[i] = static_cast<unsigned char>(s);
	}
}

void pattern::fill(void *buf, size_t len, uint64_t id, uint64_t salt) const
{
	auto *p = static_cast<unsigned char *>(buf);
	std::memcpy(p, template_.data(), std::min(len, template_.size()));
	for (size_t off = 0, b = 0; off < len; off += block, b++) {
		uint64_t st = stamp(id, salt, b);
		std::memcpy(p + off, &st, std::min(sizeof(st), len - off));
	}
}

bool pattern::verify(const void *buf, size_t len, uint64_t id, uint64_t salt) const
{
	if (len > template_.size())
		return false;
	const auto *p = static_cast<const unsigned char *>(buf);
	for (size_t off = 0, b = 0; off < len; off += block, b++) {
		uint64_t st = stamp(id, salt, b);
		size_t head = std::min(sizeof(st), len - off);
		if (std::memcmp(p + off, &st, head) != 0)
			return false;
		size_t end = std::min(off + block, len);
		if (std::memcmp(p + off + head, template_.data() + off + head, end - off - head) !=
		    0)
			return false;
	}
	return true;
}

} // namespace examples
