// SPDX-License-Identifier: MIT
// The floor registry's parser: two copies of a table file's bytes, read
// from outside, checked field by field (nothing in them is trusted).
#include "floor_read.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <unordered_map>

namespace sockbuf::registry
{

namespace
{

int fail(std::string *why, int err, const std::string &text)
{
	if (why)
		*why = text;
	return err;
}

struct plain_slot {
	uint32_t seq, taken;
	uint64_t inode;
	uint32_t who;
	int32_t snd, rcv;
};

plain_slot slot_at(const char *buf, size_t i)
{
	const char *p = buf + sizeof(file_header) + i * sizeof(file_slot);
	plain_slot s;
	std::memcpy(&s.seq, p + offsetof(file_slot, seq), 4);
	std::memcpy(&s.taken, p + offsetof(file_slot, taken), 4);
	std::memcpy(&s.inode, p + offsetof(file_slot, inode), 8);
	std::memcpy(&s.who, p + offsetof(file_slot, who), 4);
	std::memcpy(&s.snd, p + offsetof(file_slot, snd), 4);
	std::memcpy(&s.rcv, p + offsetof(file_slot, rcv), 4);
	return s;
}

bool same(const plain_slot &a, const plain_slot &b)
{
	return a.seq == b.seq && a.taken == b.taken && a.inode == b.inode && a.who == b.who &&
	       a.snd == b.snd && a.rcv == b.rcv;
}

} // namespace

int parse_header(const char *bytes, int pid, uint64_t start_time, const std::string &what,
		 header_info *out, std::string *why)
{
	file_header h;
	std::memcpy(static_cast<void *>(&h), bytes, sizeof(h));
	if (std::memcmp(h.magic, file_magic, sizeof(file_magic)) != 0)
		return fail(why, -EBADMSG, what + ": not a sockbuf floor table (magic)");
	if (h.version != file_version || h.header_size != sizeof(file_header) ||
	    h.slot_size != sizeof(file_slot) || h.nslots != slot_count)
		return fail(why, -EPROTO,
			    what + ": table version " + std::to_string(h.version) +
				" or layout not understood");
	if (h.pid != pid || h.start_time != start_time)
		return fail(why, -ESTALE, what + ": written by another process");
	if (h.publisher < 0)
		return fail(why, -EBADMSG, what + ": publisher " + std::to_string(h.publisher));
	out->publisher = h.publisher;
	out->dropped = h.dropped.load(std::memory_order_relaxed);
	out->changes = h.changes.load(std::memory_order_relaxed);
	// Only for a report: a negative pid is no daemon.
	out->guard.mem_us = h.guard_mem_us.load(std::memory_order_relaxed);
	out->guard.set_us = h.guard_set_us.load(std::memory_order_relaxed);
	out->guard.served_by = std::max(0, int(h.guard_served_by.load(std::memory_order_relaxed)));
	return 0;
}

int parse_images(const char *a, const char *b, int pid, uint64_t start_time,
		 const std::string &what, table *out, std::string *why)
{
	header_info hi;
	int ret = parse_header(a, pid, start_time, what, &hi, why);
	if (ret < 0)
		return ret;
	std::unordered_map<uint64_t, size_t> by_inode;
	table t;
	t.dropped = hi.dropped;
	t.publisher = hi.publisher;
	t.changes = hi.changes;
	t.guard = hi.guard;
	for (size_t i = 0; i < slot_count; i++) {
		plain_slot s = slot_at(a, i);
		// Seqlock over two copies: only a slot no writer touched between
		// them, and not mid-write, counts.
		if (!s.taken || !s.inode || (s.seq & 1) || !same(s, slot_at(b, i)))
			continue;
		if (!s.who || (s.who & ~known_sources) || s.snd < 0 || s.rcv < 0)
			continue;
		auto [it, fresh] = by_inode.emplace(s.inode, t.entries.size());
		if (fresh) {
			t.entries.push_back({s.inode, s.snd, s.rcv, s.who});
			continue;
		}
		entry &e = t.entries[it->second];
		e.snd = std::max(e.snd, int(s.snd));
		e.rcv = std::max(e.rcv, int(s.rcv));
		e.who |= s.who;
	}
	*out = std::move(t);
	return 0;
}

} // namespace sockbuf::registry
