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

#include <map>
#include <memory>
#include <string>
#include <utility>

namespace prometheus
{
class Exposer;
}

namespace sockbuf::daemon
{

struct service {
	std::string comm; // /proc/PID/comm
	std::string unit; // the systemd unit from /proc/PID/cgroup, or ""
};

class metrics
{
public:
	metrics();
	~metrics();
	metrics(const metrics &) = delete;
	metrics &operator=(const metrics &) = delete;

	// Serves /metrics on @addr ("ADDR:PORT").  0 or -1 with @why.
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
	// Sockets guarded per service, as counted in the last pass (services
	// not given are set to 0).
	void guarded(const std::map<std::pair<std::string, std::string>, double> &by_service);
	void processes(double n);
	void table_read() { tables_read_->Increment(); }
	void table_refused(const char *reason);
	// Time spent reading a service's floor table whole and finding its
	// sockets (per-process cost accounting).
	void table_cost(const service &s, double seconds);
	void pass(double seconds);
	// The closer threads (tools/cli/closer.h): copies not closed yet, the
	// longest wait among them, closes that were slow.
	void closes(size_t pending, double oldest_seconds, uint64_t slow);

private:
	std::shared_ptr<prometheus::Registry> registry_;
	std::unique_ptr<prometheus::Exposer> exposer_;
	prometheus::Family<prometheus::Counter> *dips_, *restores_, *refusals_, *refused_,
	    *table_cost_;
	prometheus::Family<prometheus::Gauge> *guarded_;
	prometheus::Counter *tables_read_, *passes_, *pass_seconds_;
	prometheus::Gauge *processes_, *events_up_, *event_wait_, *closes_pending_, *close_oldest_;
	prometheus::Counter *closes_slow_;
	prometheus::Family<prometheus::Histogram> *below_;
	prometheus::Counter *records_, *records_lost_;
	std::map<std::pair<std::string, std::string>, prometheus::Gauge *> guarded_seen_;
};

} // namespace sockbuf::daemon
