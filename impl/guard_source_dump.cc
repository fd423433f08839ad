// SPDX-License-Identifier: MIT
// The size source "dump": one inet_diag dump of this namespace's TCP
// sockets, the guarded ones kept.
#include "guard.h"

#include "guard_internal.h"

#include <new>
#include <unordered_map>

namespace sockbuf::guard
{

// One dump of this namespace's TCP sockets; only the guarded ones are kept.
void floor_guard::read_sizes_from_dump(size_t n)
{
	diag::filter f;
	f.states = full_socket_states();
	f.tcp_info = false;
	// One family guarded: the other family's dump (a second walk of the
	// same table) is left out.
	f.family = entries_.at(0).family;
	for (size_t i = 0; i < n; i++)
		if (entries_.at(i).family != f.family) {
			f.family = 0;
			break;
		}
	// By inode, among the entries this pass looks at (the index is the
	// set's, under mu_: a small map of the pass's own instead).
	std::unordered_map<uint32_t, size_t> mine;
	try {
		mine.reserve(n);
		for (size_t i = 0; i < n; i++)
			mine.emplace(entries_.at(i).inode, i);
	} catch (const std::bad_alloc &) {
		return; // every socket is read with getsockopt instead
	}
	int ret = diag_.each(f, [this, &mine](const diag::socket_info &s) {
		auto it = mine.find(s.inode);
		if (it != mine.end())
			now_[it->second] = {s.sndbuf, s.rcvbuf, false};
	});
	if (ret < 0)
		diag_err_ = ret; // partly filled sizes are still true; the rest fall back
}

} // namespace sockbuf::guard
