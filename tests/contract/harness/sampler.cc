// SPDX-License-Identifier: MIT
#include "sampler.h"

#include "cycle_watch.h"

#include "clock.h"
#include "diag.h"

#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>

namespace sockbuf::contract
{

namespace
{

constexpr size_t series_cap = 20000;

int64_t get_buf(int fd, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, name, &v, &len) < 0)
		return -1;
	return v;
}

int64_t floor_of(const dir_setup &d)
{
	return d.floor > 0 ? d.floor : -1;
}

} // namespace

void track::add(int64_t value, int64_t floor, int64_t t_us)
{
	if (value < 0)
		return;
	max_gap_us = std::max(max_gap_us, t_us - last_t_us);
	last_t_us = t_us;
	if (samples == 0)
		first = value;
	if (min < 0 || value < min)
		min = value;
	max = std::max(max, value);
	if (samples == 0 || value != last) {
		if (series.size() < series_cap)
			series.push_back({uint32_t(t_us), int32_t(value)});
		else
			series_truncated = true;
	}
	last = value;
	samples++;
	if (floor > 0 && value < floor) {
		below_floor++;
		if (first_below_us < 0)
			first_below_us = t_us;
		if (lowest_below < 0 || value < lowest_below)
			lowest_below = value;
		if (below_since_us < 0)
			below_since_us = t_us;
		longest_below_us = std::max(longest_below_us, t_us - below_since_us);
	} else {
		close(t_us);
	}
}

void track::close(int64_t)
{
	// The stretch ends at its last sample under the floor (add() has
	// counted up to there): a lower bound that a slow sampler cannot
	// inflate with the gap to the next sample.
	below_since_us = -1;
}

void track::end(int64_t t_us)
{
	// A track never read went unread the whole time.
	max_gap_us = std::max(max_gap_us, t_us - last_t_us);
	close(t_us);
}

void dip_log::note(int64_t t_us, bool below)
{
	if (!below) {
		// The last two cycles that read at or above the floor (the
		// start of a dip's upper bound), whether a dip is open or not.
		if (t_us != above_last_) {
			above_prev_ = above_last_;
			above_last_ = t_us;
		}
		// Another source read it under the floor in this same cycle:
		// under wins.
		if (open.first_us >= 0 && t_us != open.last_us && above_us < 0)
			above_us = t_us;
		return;
	}
	// A cycle read at or above the floor by every source came between.
	if (open.first_us >= 0 && above_us >= 0 && above_us < t_us)
		close(above_us);
	above_us = -1;
	if (open.first_us < 0) {
		open.first_us = t_us;
		// In this same cycle another source may have read it above:
		// the cycle before that one then.
		open.before_us = above_last_ < t_us ? above_last_ : above_prev_;
	}
	open.last_us = t_us;
}

void dip_log::close(int64_t after_us)
{
	if (open.first_us >= 0) {
		open.after_us = after_us;
		if (dips.size() < cap)
			dips.push_back(open);
		else
			dropped++;
		if (open.us() > longest_.us() || longest_.first_us < 0)
			longest_ = open;
		if (open.seen_us() > longest_seen_.seen_us() || longest_seen_.first_us < 0)
			longest_seen_ = open;
	}
	open = {};
	above_us = -1;
}

void dip_log::end(int64_t t_us)
{
	close(above_us >= 0 ? above_us : t_us);
}

sampler::sampler(std::vector<socket_record> *sockets, int64_t t0_ns, uint32_t period_us)
    : sockets_(sockets), t0_ns_(t0_ns), period_us_(period_us)
{
	for (size_t i = 0; i < sockets_->size(); i++)
		if ((*sockets_)[i].inode)
			by_inode_[(*sockets_)[i].inode] = i;
	split_for_cycles(*sockets_, &every_, &turns_);
}

void split_for_cycles(const std::vector<socket_record> &sockets, std::vector<size_t> *every,
		      std::vector<size_t> *turns)
{
	for (size_t i = 0; i < sockets.size(); i++) {
		const socket_record &s = sockets[i];
		if (s.fd < 0 || s.r == role::listener)
			continue;
		(time_bounded(s.a) ? every : turns)->push_back(i);
	}
}

std::vector<size_t> sampler::this_cycle()
{
	return cycle_plan(every_, turns_, &turn_pos_);
}

std::vector<size_t> cycle_plan(const std::vector<size_t> &every, const std::vector<size_t> &turns,
			       size_t *pos)
{
	std::vector<size_t> out = every;
	// A third of the bounded set: a cycle over the bounded sockets and
	// their turns then grows by a third, not twice, when the bounded set
	// does (reserve mode's arm joined it).
	size_t slice = std::max<size_t>(every.size() / 3, 16);
	if (turns.size() <= slice) {
		out.insert(out.end(), turns.begin(), turns.end());
		return out;
	}
	for (size_t k = 0; k < slice; k++)
		out.push_back(turns[(*pos + k) % turns.size()]);
	*pos = (*pos + slice) % turns.size();
	return out;
}

sampler::~sampler()
{
	stop();
}

void sampler::start()
{
	stop_ = false;
	thread_ = std::thread([this] {
		pthread_setname_np(pthread_self(), "sampler");
		loop();
	});
}

void sampler::stop()
{
	stop_ = true;
	if (thread_.joinable())
		thread_.join();
}

void sampler::record(socket_record *s, source src, int64_t snd, int64_t rcv, int64_t t_us)
{
	track &ts = src == source::getsockopt ? s->gs_snd : s->diag_snd;
	track &tr = src == source::getsockopt ? s->gs_rcv : s->diag_rcv;
	ts.add(snd, floor_of(s->snd), t_us);
	tr.add(rcv, floor_of(s->rcv), t_us);
	if (snd >= 0)
		s->snd_dips.note(t_us, floor_of(s->snd) > 0 && snd < floor_of(s->snd));
	if (rcv >= 0)
		s->rcv_dips.note(t_us, floor_of(s->rcv) > 0 && rcv < floor_of(s->rcv));
}

void sampler::sample(size_t i, int64_t t_us)
{
	socket_record &s = (*sockets_)[i];
	int64_t snd = get_buf(s.fd, SO_SNDBUF), rcv = get_buf(s.fd, SO_RCVBUF);
	if (filter_)
		filter_(t_us, s, source::getsockopt, &snd, &rcv);
	record(&s, source::getsockopt, snd, rcv, t_us);
	if (i < id_of_.size() && id_of_[i] >= 0)
		ids_now_.push_back(ids_[size_t(id_of_[i])]);
}

void sampler::cycle(int64_t t_us)
{
	ids_now_.clear();
	for (size_t i : this_cycle())
		sample(i, t_us);
	// Per-socket queries by address and cookie: a dump walks every
	// socket of the host and costs milliseconds; these are lookups.
	diag::filter f;
	f.tcp_info = false; // tcp_info takes the socket lock; SK_MEMINFO does not
	int err = session_.query(ids_now_, f, [&](const diag::socket_info &si) {
		auto it = by_inode_.find(si.inode);
		if (it == by_inode_.end())
			return;
		socket_record &s = (*sockets_)[it->second];
		int64_t snd = si.sndbuf, rcv = si.rcvbuf;
		if (filter_)
			filter_(t_us, s, source::inet_diag, &snd, &rcv);
		record(&s, source::inet_diag, snd, rcv, t_us);
		keep_first_below(&s, si, snd, rcv, t_us);
	});
	if (err < 0)
		stats_.diag_err = err;
}

// The queues beside the first size under a floor: whether moderation could
// cut that low (wmem_queued / 2) and what a reservation had left.
void sampler::keep_first_below(socket_record *s, const diag::socket_info &si, int64_t snd,
			       int64_t rcv, int64_t t_us)
{
	if (s->first_below_mem.t_ms >= 0)
		return;
	int fs = floor_of(s->snd), fr = floor_of(s->rcv);
	if (!((fs > 0 && snd >= 0 && snd < fs) || (fr > 0 && rcv >= 0 && rcv < fr)))
		return;
	s->first_below_mem = {double(t_us) / 1e3, snd,		 rcv,
			      si.wmem_queued,	  si.rmem_alloc, si.fwd_alloc};
}

void sampler::learn_ids()
{
	// One dump finds the address and cookie of every scenario socket.
	diag::filter f;
	f.family = AF_INET;
	f.tcp_info = false;
	f.states = ~(1u << TCP_LISTEN); // listeners are not sampled
	id_of_.assign(sockets_->size(), -1);
	int err = session_.each(f, [&](const diag::socket_info &si) {
		auto it = by_inode_.find(si.inode);
		if (it == by_inode_.end())
			return;
		id_of_[it->second] = int(ids_.size());
		ids_.push_back(si);
	});
	if (err < 0)
		stats_.diag_err = err;
}

void sampler::loop()
{
	stats_.scheduling = make_observer_thread();
	learn_ids();
	int64_t start = now_ns(), last = start;
	int64_t next = start, busy = 0;
	while (!stop_.load(std::memory_order_relaxed)) {
		// The kernel's counters first, then the sockets at the cycle's
		// time: a reading of a guard's wait is never later than the
		// samples of its cycle, so a wait that ended after it counts
		// for the dip those samples still saw (cycle_watch.h).
		if (watch_)
			watch_->read();
		int64_t now = now_ns();
		cycle((now - t0_ns_) / 1000);
		const int64_t took = now_ns() - now;
		busy += took;
		stats_.max_cycle_us = std::max(stats_.max_cycle_us, double(took) / 1e3);
		stats_.cycles++;
		stats_.max_gap_ms = std::max(stats_.max_gap_ms, double(now - last) / 1e6);
		last = now;
		// A real-time thread must leave the CPU: after a cycle longer than
		// the period (hundreds of sockets) rest half a cycle, so the
		// sampler never takes more than two thirds of a core.
		int64_t end = now_ns();
		next += int64_t(period_us_) * 1000;
		next = std::max(next, end + (end - now) / 2);
		sleep_until_ns(next);
	}
	int64_t end = now_ns();
	for (auto &s : *sockets_) {
		for (track *t : {&s.gs_snd, &s.gs_rcv, &s.diag_snd, &s.diag_rcv})
			t->end((end - t0_ns_) / 1000);
		s.snd_dips.end((end - t0_ns_) / 1000);
		s.rcv_dips.end((end - t0_ns_) / 1000);
	}
	stats_.seconds = double(end - start) / 1e9;
	stats_.rate_hz = stats_.seconds > 0 ? double(stats_.cycles) / stats_.seconds : 0;
	stats_.mean_cycle_us = stats_.cycles ? double(busy) / 1e3 / double(stats_.cycles) : 0;
}

} // namespace sockbuf::contract
