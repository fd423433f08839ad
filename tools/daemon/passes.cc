// SPDX-License-Identifier: MIT
// Keeping the floors: a full pass of the guard over every socket, the
// event map kept in step with the guard's set, and the records the
// event programs post, each socket named restored (and the map told
// what it can reach).
#include "host.h"
#include "host_util.h"

#include <algorithm>

namespace sockbuf::daemon
{

void host::full_pass()
{
	const uint64_t t0 = cli::remote::monotonic_ms();
	const auto errors_before = guard_.stats().errors;
	guard_.pass([this](const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
			   const struct sockbuf_report &rep) { restored(s, snd, rcv, rep); });
	if (guard_.stats().errors > errors_before)
		metrics_.refusals({}, "error", double(guard_.stats().errors - errors_before));
	metrics_.pass(double(cli::remote::monotonic_ms() - t0) / 1000.0);
	if (ev_err_ == 0)
		sync_watch(); // the pass may have dropped closed sockets
}

void host::sync_watch()
{
	set_changed_ = false;
	std::map<uint32_t, std::pair<int, int>> now;
	// What a restore would raise to (the owner's reach where its limits
	// keep it short): a map floor above it would post a record at every
	// send and ACK that no restore can answer.
	for (const cli::remote::socket_ref &s : guard_.sockets()) {
		auto &f = now[s.inode];
		f.first = std::max(f.first, s.floor.snd ? s.want_snd() : 0);
		f.second = std::max(f.second, s.floor.rcv ? s.want_rcv() : 0);
	}
	for (auto it = watched_.begin(); it != watched_.end();) {
		if (now.count(it->first)) {
			++it;
			continue;
		}
		ev_.unwatch(it->first);
		it = watched_.erase(it);
	}
	for (const auto &[ino, f] : now) {
		auto it = watched_.find(ino);
		if (it != watched_.end() && it->second == f)
			continue;
		// Not in the map (full: -E2BIG, or no memory): the passes still
		// keep it, at the net's interval.
		if (ev_.watch(ino, f.first, f.second) == 0)
			watched_[ino] = f;
	}
}

// The records lost since the last look (a full ring, or the kernel's
// skipped runs of a program: event_source::lost()), counted.
uint64_t host::take_lost()
{
	const uint64_t lost = ev_.lost();
	const uint64_t lost_now = lost - lost_seen_;
	lost_seen_ = lost;
	metrics_.records(0, double(lost_now));
	return lost_now;
}

void host::on_records()
{
	inos_.clear();
	posted_ns_.clear();
	if (ev_.drain(&inos_, &posted_ns_) < 0 && inos_.empty())
		return;
	const uint64_t lost_now = take_lost();
	metrics_.records(double(inos_.size()), 0);
	metrics_.event_wait_max(double(ev_.max_wait_ns()) / 1e9);
	const auto cb = [this](const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
			       const struct sockbuf_report &rep) { restored(s, snd, rcv, rep); };
	for (size_t i = 0; i < inos_.size(); i++) {
		const uint32_t ino = inos_[i];
		auto w = watched_.find(ino);
		if (w == watched_.end()) {
			ev_.unwatch(ino); // no longer the daemon's
			continue;
		}
		// The mark first, then the restore: a cut between the two posts
		// again (a harmless second look), where the other order would
		// leave a socket cut after the restore with no record at all.
		if (ev_.clear(ino, w->second.first, w->second.second) < 0)
			unclear_.push_back(ino);
		posted_now_ = i < posted_ns_.size() ? posted_ns_[i] : 0;
		const uint64_t errors = guard_.stats().errors;
		const bool guarded = guard_.restore_inode(ino, cb);
		posted_now_ = 0;
		const cli::remote::socket_ref *s = guarded ? guard_.find_inode(ino) : nullptr;
		if (!s || guard_.stats().errors != errors) {
			// Gone, or its restore failed (EPERM from pidfd_getfd and
			// the like): out of the map, so that it cannot post at every
			// send; passes look at it, and the next change of the set
			// puts it back.
			ev_.unwatch(ino);
			watched_.erase(w);
			continue;
		}
		// Restored short of its floor (the owner's limits): the map holds
		// what it can reach, not the floor it cannot.
		const std::pair<int, int> want = {s->floor.snd ? s->want_snd() : 0,
						  s->floor.rcv ? s->want_rcv() : 0};
		if (want != w->second && ev_.watch(ino, want.first, want.second) == 0)
			w->second = want;
	}
	if (lost_now)
		full_pass(); // a record had no room: look at everything
}

} // namespace sockbuf::daemon
