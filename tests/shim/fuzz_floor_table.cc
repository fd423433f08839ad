// SPDX-License-Identifier: MIT
// libFuzzer target for the floor registry's parser (tools/remote/floor_parse.cc),
// which `sockbuf show` runs, often as root, over files that any process
// writes: no crash, no out-of-bounds read, and a table it accepts holds
// only entries with an inode, non-negative floors, known publishers, each
// inode once, never more than the file's slots.
//
// The input is the start of a table file (zero-padded to its full size);
// a first byte's low bit set makes the second copy differ from the first
// in the slot that byte names, as a writer caught mid-write would.
#include "floor_read.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace sockbuf::registry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const bool torn = data[0] & 1;
	const size_t torn_slot = data[0] % slot_count;
	std::vector<char> a(file_size, 0);
	std::memcpy(a.data(), data + 1, std::min(size - 1, file_size));
	std::vector<char> b = a;
	if (torn)
		b[sizeof(file_header) + torn_slot * sizeof(file_slot) + 8] ^= 1; // its inode
	// The pid and start time the header claims, so that parsing goes on
	// to the slots; and once with another pid, which must be refused.
	file_header h;
	std::memcpy(static_cast<void *>(&h), a.data(), sizeof(h));
	table t;
	std::string why;
	if (parse_images(a.data(), b.data(), h.pid ^ 1, h.start_time, "f", &t, &why) == 0)
		std::abort(); // another process's table accepted
	if (parse_images(a.data(), b.data(), h.pid, h.start_time, "f", &t, &why) != 0)
		return 0;
	if (t.entries.size() > slot_count || t.publisher < 0)
		std::abort();
	std::set<uint64_t> seen;
	for (const entry &e : t.entries) {
		if (e.inode == 0 || e.snd < 0 || e.rcv < 0 || e.who == 0 ||
		    (e.who & ~known_sources) || !seen.insert(e.inode).second)
			std::abort();
	}
	return 0;
}
