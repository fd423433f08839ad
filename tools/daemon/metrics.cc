// SPDX-License-Identifier: MIT
#include "metrics.h"

#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

namespace sockbuf::daemon
{

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

metrics::metrics() : registry_(std::make_shared<prometheus::Registry>())
{
	dips_ = &BuildCounter()
		     .Name("sockbuf_dips_total")
		     .Help("Buffer directions found below their floor")
		     .Register(*registry_);
	restores_ = &BuildCounter()
			 .Name("sockbuf_restores_total")
			 .Help("Buffer directions raised back to their floor, by the "
			       "daemon (source=\"daemon\"), found by an event record "
			       "(found=\"event\") or a pass (found=\"pass\")")
			 .Register(*registry_);
	refusals_ = &BuildCounter()
			 .Name("sockbuf_refusals_total")
			 .Help("Restores left short of the floor because the owning "
			       "process could not set more itself (reason=\"limit\": "
			       "net.core.[rw]mem_max without CAP_NET_ADMIN), or that failed "
			       "(reason=\"error\")")
			 .Register(*registry_);
	refused_ = &BuildCounter()
			.Name("sockbuf_tables_refused_total")
			.Help("Floor tables skipped, each once per reason: not the process's "
			      "file, bad contents, another network namespace")
			.Register(*registry_);
	table_cost_ = &BuildCounter()
			   .Name("sockbuf_table_read_seconds_total")
			   .Help("Time spent reading a service's floor tables whole and finding "
				 "their sockets in its descriptor table")
			   .Register(*registry_);
	guarded_ = &BuildGauge()
			.Name("sockbuf_guarded_sockets")
			.Help("Sockets whose floors the daemon keeps")
			.Register(*registry_);
	tables_read_ = &BuildCounter()
			    .Name("sockbuf_tables_read_total")
			    .Help("Floor tables read whole")
			    .Register(*registry_)
			    .Add({});
	auto &passes = BuildCounter()
			   .Name("sockbuf_passes_total")
			   .Help("Passes over the guarded sockets")
			   .Register(*registry_);
	passes_ = &passes.Add({});
	pass_seconds_ = &BuildCounter()
			     .Name("sockbuf_pass_seconds_total")
			     .Help("Wall time spent in passes")
			     .Register(*registry_)
			     .Add({});
	below_ = &BuildHistogram()
		      .Name("sockbuf_below_floor_seconds")
		      .Help("Time a socket the event programs saw cut stayed below its floor, "
			    "from the kernel function's exit to the restore")
		      .Register(*registry_);
	events_up_ = &BuildGauge()
			  .Name("sockbuf_event_source_up")
			  .Help("1 while the host's event programs drive restores, 0 while "
				"the daemon polls")
			  .Register(*registry_)
			  .Add({});
	event_wait_ = &BuildGauge()
			   .Name("sockbuf_event_wait_seconds_max")
			   .Help("The longest a record waited in the ring for the daemon's "
				 "thread: the scheduler's share of the time below the floor")
			   .Register(*registry_)
			   .Add({});
	records_ = &BuildCounter()
			.Name("sockbuf_event_records_total")
			.Help("Records read: sockets the kernel left below a floor")
			.Register(*registry_)
			.Add({});
	records_lost_ = &BuildCounter()
			     .Name("sockbuf_event_records_lost_total")
			     .Help("Records the ring buffer had no room for (each followed "
				   "by a full pass)")
			     .Register(*registry_)
			     .Add({});
	processes_ = &BuildGauge()
			  .Name("sockbuf_processes")
			  .Help("Processes whose floor tables the daemon serves")
			  .Register(*registry_)
			  .Add({});
	closes_pending_ = &BuildGauge()
			       .Name("sockbufd_closes_pending")
			       .Help("Copies of served sockets handed to the closer threads and "
				     "not closed yet (a close sleeps while an owner's SO_LINGER "
				     "waits for its peer)")
			       .Register(*registry_)
			       .Add({});
	close_oldest_ = &BuildGauge()
			     .Name("sockbufd_close_oldest_seconds")
			     .Help("How long the oldest close not done yet has waited")
			     .Register(*registry_)
			     .Add({});
	closes_slow_ = &BuildCounter()
			    .Name("sockbufd_closes_slow_total")
			    .Help("Closes of copies that took longer than 20 ms")
			    .Register(*registry_)
			    .Add({});
}

void metrics::closes(size_t pending, double oldest_seconds, uint64_t slow)
{
	closes_pending_->Set(double(pending));
	close_oldest_->Set(oldest_seconds);
	if (double(slow) > closes_slow_->Value())
		closes_slow_->Increment(double(slow) - closes_slow_->Value());
}

metrics::~metrics() = default;

int metrics::listen(const std::string &addr, std::string *why)
{
	try {
		exposer_ = std::make_unique<prometheus::Exposer>(addr, 1);
		exposer_->RegisterCollectable(registry_);
	} catch (const std::exception &e) {
		*why = e.what();
		return -1;
	}
	return 0;
}

int metrics::write_file(const std::string &path) const
{
	const std::string text = prometheus::TextSerializer().Serialize(registry_->Collect());
	const std::string tmp = path + ".tmp";
	int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < text.size()) {
		const ssize_t n = write(fd, text.data() + done, text.size() - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			const int err = n < 0 ? errno : EIO;
			close(fd);
			unlink(tmp.c_str());
			return -err;
		}
		done += size_t(n);
	}
	if (close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
		const int err = errno;
		unlink(tmp.c_str());
		return -err;
	}
	return 0;
}

void metrics::dips(const service &s, double n)
{
	dips_->Add({{"comm", s.comm}, {"unit", s.unit}}).Increment(n);
}

void metrics::restores(const service &s, const char *source, const char *found, double n)
{
	restores_->Add({{"comm", s.comm}, {"unit", s.unit}, {"source", source}, {"found", found}})
	    .Increment(n);
}

// 100 us to 1 s: an event restore takes about a millisecond; the tail is
// the scheduler's and the daemon's other work.
void metrics::below_floor(const service &s, double seconds)
{
	static const prometheus::Histogram::BucketBoundaries bounds = {
	    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
	below_->Add({{"comm", s.comm}, {"unit", s.unit}}, bounds).Observe(seconds);
}

void metrics::records(double read, double lost)
{
	if (read > 0)
		records_->Increment(read);
	if (lost > 0)
		records_lost_->Increment(lost);
}

void metrics::refusals(const service &s, const char *reason, double n)
{
	refusals_->Add({{"comm", s.comm}, {"unit", s.unit}, {"reason", reason}}).Increment(n);
}

void metrics::guarded(const std::map<std::pair<std::string, std::string>, double> &by_service)
{
	for (auto &[key, g] : guarded_seen_)
		if (!by_service.count(key))
			g->Set(0);
	for (const auto &[key, n] : by_service) {
		auto it = guarded_seen_.find(key);
		if (it == guarded_seen_.end())
			it = guarded_seen_
				 .emplace(key, &guarded_->Add(
						   {{"comm", key.first}, {"unit", key.second}}))
				 .first;
		it->second->Set(n);
	}
}

void metrics::processes(double n)
{
	processes_->Set(n);
}

void metrics::table_cost(const service &s, double seconds)
{
	table_cost_->Add({{"comm", s.comm}, {"unit", s.unit}}).Increment(seconds);
}

void metrics::table_refused(const char *reason)
{
	refused_->Add({{"reason", reason}}).Increment();
}

void metrics::pass(double seconds)
{
	passes_->Increment();
	pass_seconds_->Increment(seconds);
}

} // namespace sockbuf::daemon
