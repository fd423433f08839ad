// SPDX-License-Identifier: MIT
// sockbufd's metrics, through prometheus-cpp: per service (the process's
// name and, where systemd runs it, its unit) the sockets guarded, the
// directions found below their floor, the restores, the refusals, the
// time below the floor of the cuts the event programs saw; per host the
// tables read and refused, the event source's records.  Served on a loopback address and/or
// written as a node_exporter textfile (a temporary file renamed over the
// old one: a scrape never sees half of it).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sockbuf::daemon
{

struct service {
	std::string comm; // /proc/PID/comm
	std::string unit; // the systemd unit from /proc/PID/cgroup, or ""
};

// @text made safe for a label value and a log line, whoever chose it (a
// process names itself): valid UTF-8, every control character (C0, DEL,
// C1) and every byte that is not part of a valid sequence replaced by
// '?', at most 128 bytes.
std::string clean(std::string_view text);

// At most @per_s lines a second of one kind; the rest counted and said in
// one line when the next second begins ("N more WHAT lines ...").
class line_limiter
{
public:
	line_limiter(unsigned int per_s, const char *what) : per_s_(per_s), what_(what) {}
	// Whether a line may be printed now (@now_ms: CLOCK_MONOTONIC).
	bool allow(uint64_t now_ms);

private:
	const unsigned int per_s_;
	const char *const what_;
	uint64_t from_ = 0;
	unsigned int now_ = 0;
	uint64_t held_ = 0;
};

class metrics
{
public:
	metrics();
	~metrics();
	metrics(const metrics &) = delete;
	metrics &operator=(const metrics &) = delete;

	// Serves /metrics on @addr ("ADDR:PORT", "[V6ADDR]:PORT") from a
	// thread of its own.  0 or -1 with @why (the call and its errno).
	int listen(const std::string &addr, std::string *why);
	// Writes the textfile at @path.  0 or -errno.
	int write_file(const std::string &path) const;

	void dips(const service &s, double n);
	// @found: "event" (a record named the socket) or "pass".
	void restores(const service &s, const char *source, const char *found, double n);
	// How long a socket the event programs saw cut stayed below its
	// floor: from the exit of the kernel function that cut it to the
	// restore's return.
	void below_floor(const service &s, double seconds);
	// The event source: up (1) or polling (0); records read and lost.
	void events_up(bool up) { events_up_->Set(up ? 1 : 0); }
	void records(double read, double lost);
	// The longest a record waited in the ring for the daemon's thread
	// (the scheduler's share of sockbuf_below_floor_seconds).
	void event_wait_max(double seconds) { event_wait_->Set(seconds); }
	void refusals(const service &s, const char *reason, double n);
	// Sockets guarded per service, as counted in the last pass: the
	// series of every service not given are removed (its processes are
	// gone), in every family.
	void guarded(const std::map<std::pair<std::string, std::string>, double> &by_service);
	void processes(double n);
	void table_read() { tables_read_->Increment(); }
	void table_refused(const char *reason);
	// Time spent reading a service's floor table whole and finding its
	// sockets (per-process cost accounting).
	void table_cost(const service &s, double seconds);
	void pass(double seconds);
	// The closer threads (tools/remote/closer.h): copies not closed yet, the
	// longest wait among them, closes that were slow.
	void closes(size_t pending, double oldest_seconds, uint64_t slow);

	// Services with series of their own at most (--max-services); the
	// rest are counted under comm="(other)"
	// (sockbufd_series_overflow_total).
	void max_services(size_t n) { max_services_ = n; }

private:
	using key = std::pair<std::string, std::string>;
	// The labels of service @s (cleaned; "(other)" past the cap) and the
	// series @f gives them with @extra, remembered for removal.
	template <typename T>
	T &series(prometheus::Family<T> *f, const service &s,
		  std::map<std::string, std::string> extra = {});
	template <typename T>
	T &series(prometheus::Family<T> *f, const service &s,
		  std::map<std::string, std::string> extra,
		  const typename T::BucketBoundaries &bounds);
	key admit(const service &s);
	std::map<key, std::vector<std::function<void()>>> removers_;
	std::set<std::pair<const void *, const void *>> known_; // (family, series)
	prometheus::Counter *overflow_;
	size_t max_services_ = 1000;

	std::shared_ptr<prometheus::Registry> registry_;
	prometheus::Family<prometheus::Counter> *dips_, *restores_, *refusals_, *refused_,
	    *table_cost_;
	prometheus::Family<prometheus::Gauge> *guarded_;
	prometheus::Counter *tables_read_, *passes_, *pass_seconds_;
	prometheus::Gauge *processes_, *events_up_, *event_wait_, *closes_pending_, *close_oldest_;
	prometheus::Counter *closes_slow_;
	prometheus::Family<prometheus::Histogram> *below_;
	prometheus::Counter *records_, *records_lost_;
};

} // namespace sockbuf::daemon
