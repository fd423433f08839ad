// SPDX-License-Identifier: MIT
#include "track.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <ctime>

namespace sockbuf::kcheck
{

namespace
{

void fall(int now, int &peak, int &max_fall, int &low, long &drops, int prev)
{
	if (now < prev)
		drops++;
	peak = std::max(peak, now);
	if (peak - now > max_fall) {
		max_fall = peak - now;
		low = now;
	}
}

void dip(dip_bounds &d, bool below, long ms, long prev_ms)
{
	if (below) {
		if (!d.open) {
			d.open = true;
			d.count++;
			d.first_ms = ms;
			d.before_ms = prev_ms;
		}
		d.last_ms = ms;
		d.longest_lower_ms = std::max(d.longest_lower_ms, d.last_ms - d.first_ms);
		return;
	}
	if (d.open) {
		d.open = false;
		d.longest_upper_ms = std::max(d.longest_upper_ms, ms - d.before_ms);
	}
}

int64_t mono_now_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int port_of(int fd, bool peer)
{
	sockaddr_storage a{};
	socklen_t len = sizeof(a);
	int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr *>(&a), &len)
		      : getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
	if (rc < 0)
		return -1;
	if (a.ss_family == AF_INET)
		return ntohs(reinterpret_cast<sockaddr_in *>(&a)->sin_port);
	if (a.ss_family == AF_INET6)
		return ntohs(reinterpret_cast<sockaddr_in6 *>(&a)->sin6_port);
	return -1;
}

void note_below(first_below &b, int sndbuf, int reference, long ms, int64_t now, int64_t prev)
{
	if (b.ms >= 0 || !reference || sndbuf >= reference)
		return;
	b.ms = ms;
	b.mono_ns = now;
	b.prev_mono_ns = prev;
	b.sndbuf = sndbuf;
	b.reference = reference;
}

} // namespace

void track_sample(int fd, socket_track &t, bool first, long ms, bool series)
{
	sockbuf_state s{};
	if (sockbuf_get_state(fd, &s) < 0)
		return;
	const int64_t now = mono_now_ns();
	if (first) {
		t.local_port = port_of(fd, false);
		t.remote_port = port_of(fd, true);
		t.t0_mono_ns = now - int64_t(ms) * 1000000;
		t.start = s;
		t.min_snd = t.max_snd = s.sndbuf;
		t.min_rcv = t.max_rcv = s.rcvbuf;
	}
	fall(s.sndbuf, t.peak_snd, t.max_fall_snd, t.low_after_peak_snd, t.drops_snd,
	     first ? s.sndbuf : t.end.sndbuf);
	fall(s.rcvbuf, t.peak_rcv, t.max_fall_rcv, t.low_after_peak_rcv, t.drops_rcv,
	     first ? s.rcvbuf : t.end.rcvbuf);
	// The coarse tick, plus every change between ticks (bounded), so that
	// a dip shorter than the tick still shows in the series and its plot.
	constexpr size_t max_change_points = 2000;
	const bool changed =
	    !t.series.empty() && (t.series.back()[1] != s.sndbuf || t.series.back()[2] != s.rcvbuf);
	if (series || (changed && t.series.size() < max_change_points))
		t.series.push_back({ms, s.sndbuf, s.rcvbuf});
	// A buffer found under its floor is counted as under it since the
	// sample before: the time below is known only to a sampling interval.
	const long since = first || t.last_sample_ms < 0 ? 0 : ms - t.last_sample_ms;
	dip(t.dips_snd, t.floor.snd && s.sndbuf < t.floor.snd, ms, ms - since);
	const int initial = t.at_setup.sndbuf > 0 ? t.at_setup.sndbuf : t.start.sndbuf;
	note_below(t.snd_below_initial, s.sndbuf, initial, ms, now, first ? -1 : t.last_mono_ns);
	note_below(t.snd_below_floor, s.sndbuf, t.floor.snd, ms, now, first ? -1 : t.last_mono_ns);
	t.last_mono_ns = now;
	t.last_sample_ms = ms;
	t.max_gap_ms = std::max(t.max_gap_ms, since);
	t.end = s;
	t.samples++;
	t.min_snd = std::min(t.min_snd, s.sndbuf);
	t.max_snd = std::max(t.max_snd, s.sndbuf);
	t.min_rcv = std::min(t.min_rcv, s.rcvbuf);
	t.max_rcv = std::max(t.max_rcv, s.rcvbuf);
	if (t.floor.snd && s.sndbuf < t.floor.snd) {
		t.below_floor_snd++;
		t.below_floor_ms_snd += since;
	}
	if (t.floor.rcv && s.rcvbuf < t.floor.rcv) {
		t.below_floor_rcv++;
		t.below_floor_ms_rcv += since;
	}
}

} // namespace sockbuf::kcheck
