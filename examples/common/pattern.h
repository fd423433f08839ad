// SPDX-License-Identifier: MIT
// Verifiable payloads: every 4 KB block starts with a stamp derived from the
// message id and block number, the rest is a fixed pseudo-random template.
// A lost, repeated, reordered or corrupted block fails verify().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace examples
{

class pattern
{
public:
	explicit pattern(size_t max_len);
	// Fills @len bytes for message @id; @salt tells requests from replies.
	void fill(void *buf, size_t len, uint64_t id, uint64_t salt) const;
	bool verify(const void *buf, size_t len, uint64_t id, uint64_t salt) const;

private:
	std::vector<unsigned char> template_;
};

} // namespace examples
