// SPDX-License-Identifier: MIT
// The guard's sockets, stored so that a pass can read them without the
// set's lock while add() appends and remove() marks: entries live in
// fixed-size chunks that never move, so adding never invalidates an entry
// a pass is reading.  Only the pass compacts (under the set's lock), and
// an entry's fields never change once added, but for its `removed` mark.
#pragma once

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace sockbuf::guard
{

struct entry {
	int fd;
	int family;	 // AF_INET or AF_INET6 (SO_DOMAIN)
	uint32_t inode;	 // the socket's identity where there is no cookie
	uint64_t cookie; // SO_COOKIE: is this fd still the socket added? 0 unknown
	uint64_t seq;	 // order of adding: the later of two entries on one number wins
	struct sockbuf_floor floor;
	// Set by remove() under the set's lock; a pass reads it without the
	// lock to skip work and under the lock right before a restore.
	std::atomic<bool> removed{false};

	entry() = default;
	entry(const entry &o)
	    : fd(o.fd), family(o.family), inode(o.inode), cookie(o.cookie), seq(o.seq),
	      floor(o.floor), removed(o.removed.load(std::memory_order_relaxed))
	{
	}
	entry &operator=(const entry &o)
	{
		fd = o.fd;
		family = o.family;
		inode = o.inode;
		cookie = o.cookie;
		seq = o.seq;
		floor = o.floor;
		removed.store(o.removed.load(std::memory_order_relaxed), std::memory_order_relaxed);
		return *this;
	}
};

class entry_store
{
public:
	// At most this many sockets in one guard: more than any process can
	// have open under the default fs.nr_open (2^20).
	static constexpr size_t chunk = 1024, max_chunks = 1024;

	entry_store() = default;
	entry_store(const entry_store &) = delete;
	entry_store &operator=(const entry_store &) = delete;

	size_t size() const { return size_.load(std::memory_order_acquire); }
	entry &at(size_t i) { return chunks_[i / chunk][i % chunk]; }
	const entry &at(size_t i) const { return chunks_[i / chunk][i % chunk]; }

	// Appends a copy of @e (the set's lock held): its index, or -ENOMEM.
	long push_back(const entry &e)
	{
		const size_t n = size();
		if (n / chunk >= max_chunks)
			return -ENOMEM;
		if (!chunks_[n / chunk]) {
			chunks_[n / chunk].reset(new (std::nothrow) entry[chunk]);
			if (!chunks_[n / chunk])
				return -ENOMEM;
		}
		at(n) = e;
		size_.store(n + 1, std::memory_order_release);
		return long(n);
	}

	// Drops the last entry (the set's lock held, no pass reading).
	void pop_back() { size_.store(size() - 1, std::memory_order_release); }

private:
	std::unique_ptr<entry[]> chunks_[max_chunks];
	std::atomic<size_t> size_{0};
};

} // namespace sockbuf::guard
