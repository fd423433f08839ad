// SPDX-License-Identifier: MIT
#include "metrics.h"

#include "version.h"

#include <prometheus/text_serializer.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
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
			     .Help("Records never read: the ring buffer had no room, or "
				   "the kernel skipped a program's run (each followed by a "
				   "full pass)")
			     .Register(*registry_)
			     .Add({});
	processes_ = &BuildGauge()
			  .Name("sockbuf_processes")
			  .Help("Processes whose floor tables the daemon serves")
			  .Register(*registry_)
			  .Add({});
	BuildGauge()
	    .Name("sockbufd_build_info")
	    .Help("1, labelled with the daemon's version")
	    .Register(*registry_)
	    .Add({{"version", release::version_text(SOCKBUF_VERSION)}})
	    .Set(1);
	overflow_ = &BuildCounter()
			 .Name("sockbufd_series_overflow_total")
			 .Help("Samples counted under comm=\"(other)\": more services than "
			       "the daemon keeps series for (--max-services)")
			 .Register(*registry_)
			 .Add({});
	// Present at 0 from the start: a rate() over them needs a first sample.
	for (const char *reason : {"owner", "stale", "contents", "netns"})
		refused_->Add({{"reason", reason}});
	for (const char *reason : {"error", "closing"})
		refusals_->Add({{"comm", ""}, {"unit", ""}, {"reason", reason}});
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

namespace
{

// One scrape on connection @c: a request read (at most 8 KiB, 2 s),
// the text for GET /metrics, 404 for anything else; then closed.
void answer(int c, const std::shared_ptr<prometheus::Registry> &registry)
{
	const struct timeval tv = {1, 0};
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	std::string req;
	char buf[1024];
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (clock_gettime(CLOCK_MONOTONIC, &t) == 0 && t.tv_sec < t0.tv_sec + 2 &&
	       req.size() < 8192 && req.find("\r\n\r\n") == std::string::npos &&
	       req.find("\n\n") == std::string::npos) {
		const ssize_t n = recv(c, buf, sizeof(buf), 0);
		if (n <= 0)
			return;
		req.append(buf, size_t(n));
	}
	if (req.find("\n\n") == std::string::npos && req.find("\r\n\r\n") == std::string::npos)
		return; // too slow, or too long
	const bool ok = req.starts_with("GET /metrics ") || req.starts_with("GET /metrics?");
	const std::string body = ok ? prometheus::TextSerializer().Serialize(registry->Collect())
				    : std::string("not found: try /metrics\n");
	const std::string head =
	    fmt::format("HTTP/1.1 {}\r\nContent-Type: text/plain; version=0.0.4; "
			"charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
			ok ? "200 OK" : "404 Not Found", body.size());
	const std::string all = head + body;
	size_t done = 0;
	while (done < all.size()) {
		const ssize_t n = send(c, all.data() + done, all.size() - done, MSG_NOSIGNAL);
		if (n <= 0)
			return;
		done += size_t(n);
	}
}

struct server {
	int fd;
	std::shared_ptr<prometheus::Registry> registry;
};

void *serve(void *arg)
{
	std::unique_ptr<server> s(static_cast<server *>(arg));
	for (;;) {
		const int c = accept4(s->fd, nullptr, nullptr, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno != EINTR && errno != ECONNABORTED && errno != EMFILE &&
			    errno != ENFILE && errno != ENOBUFS && errno != ENOMEM)
				return nullptr;
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(100 * 1000); // out of descriptors: the others first
			continue;
		}
		answer(c, s->registry);
		close(c);
	}
}

} // namespace

// A listener of our own, not prometheus-cpp's Exposer: civetweb (as
// Debian builds it) takes no IPv6 address and says only "null context"
// when a bind fails, and the Exposer adds its own exposer_* series.  One
// thread, one scrape at a time, each bounded to a second either way.
int metrics::listen(const std::string &addr, std::string *why)
{
	const size_t colon = addr.rfind(':');
	std::string host = addr.substr(0, colon);
	const std::string port = addr.substr(colon + 1);
	if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
		host = host.substr(1, host.size() - 2);
	struct addrinfo hints = {};
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	struct addrinfo *ai = nullptr;
	if (int err = getaddrinfo(host.c_str(), port.c_str(), &hints, &ai)) {
		*why = fmt::format("address {}: {}", host, gai_strerror(err));
		return -1;
	}
	const int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*why = fmt::format("socket: {}", std::strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	const int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
		*why = fmt::format("bind: {}", std::strerror(errno));
		freeaddrinfo(ai);
		close(fd);
		return -1;
	}
	freeaddrinfo(ai);
	// Its signals blocked: they are the main thread's.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	auto *srv = new server{fd, registry_};
	const int err = pthread_create(&t, &attr, serve, srv);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	if (err) {
		delete srv;
		close(fd);
		*why = fmt::format("thread: {}", std::strerror(err));
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

std::string clean(std::string_view text)
{
	std::string out;
	const size_t n = std::min<size_t>(text.size(), 128);
	for (size_t i = 0; i < n;) {
		const auto c = static_cast<unsigned char>(text[i]);
		size_t len = c < 0x80	      ? 1
			     : (c >> 5) == 6  ? 2
			     : (c >> 4) == 14 ? 3
			     : (c >> 3) == 30 ? 4
					      : 0;
		uint32_t cp = len == 1	 ? c
			      : len == 2 ? (c & 0x1f)
			      : len == 3 ? (c & 0x0f)
					 : (c & 0x07);
		bool ok = len && i + len <= n;
		for (size_t k = 1; ok && k < len; k++) {
			const auto b = static_cast<unsigned char>(text[i + k]);
			ok = (b & 0xc0) == 0x80;
			cp = (cp << 6) | (b & 0x3f);
		}
		// Overlong forms, surrogates, beyond U+10FFFF; controls.
		static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
		if (ok && (cp < least[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff))
			ok = false;
		if (ok && (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)))
			ok = false;
		if (!ok) {
			out += '?';
			i++;
			continue;
		}
		out.append(text.substr(i, len));
		i += len;
	}
	return out;
}

bool line_limiter::allow(uint64_t now_ms)
{
	if (now_ms >= from_ + 1000) {
		if (held_)
			std::fprintf(
			    stderr,
			    "sockbufd: %llu more %s lines in the last second not logged (at "
			    "most %u a second)\n",
			    static_cast<unsigned long long>(held_), what_, per_s_);
		from_ = now_ms;
		now_ = 0;
		held_ = 0;
	}
	if (now_ >= per_s_) {
		held_++;
		return false;
	}
	now_++;
	return true;
}

metrics::key metrics::admit(const service &s)
{
	key k{clean(s.comm), clean(s.unit)};
	if (removers_.count(k) || (k.first.empty() && k.second.empty()))
		return k;
	if (removers_.size() >= max_services_) {
		overflow_->Increment();
		return {"(other)", ""};
	}
	removers_[k]; // admitted
	return k;
}

template <typename T>
T &metrics::series(prometheus::Family<T> *f, const service &s,
		   std::map<std::string, std::string> extra)
{
	const key k = admit(s);
	extra["comm"] = k.first;
	extra["unit"] = k.second;
	T &m = f->Add(extra);
	if (known_.emplace(f, &m).second)
		removers_[k].push_back([this, f, &m] {
			known_.erase({f, &m});
			f->Remove(&m);
		});
	return m;
}

template <typename T>
T &metrics::series(prometheus::Family<T> *f, const service &s,
		   std::map<std::string, std::string> extra,
		   const typename T::BucketBoundaries &bounds)
{
	const key k = admit(s);
	extra["comm"] = k.first;
	extra["unit"] = k.second;
	T &m = f->Add(extra, bounds);
	if (known_.emplace(f, &m).second)
		removers_[k].push_back([this, f, &m] {
			known_.erase({f, &m});
			f->Remove(&m);
		});
	return m;
}

void metrics::dips(const service &s, double n)
{
	series(dips_, s).Increment(n);
}

void metrics::restores(const service &s, const char *source, const char *found, double n)
{
	series(restores_, s, {{"source", source}, {"found", found}}).Increment(n);
}

// 100 us to 1 s: an event restore takes about a millisecond; the tail is
// the scheduler's and the daemon's other work.
void metrics::below_floor(const service &s, double seconds)
{
	static const prometheus::Histogram::BucketBoundaries bounds = {
	    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
	series(below_, s, {}, bounds).Observe(seconds);
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
	series(refusals_, s, {{"reason", reason}}).Increment(n);
}

void metrics::guarded(const std::map<std::pair<std::string, std::string>, double> &by_service)
{
	std::map<key, double> now;
	for (const auto &[k, n] : by_service)
		now[admit({k.first, k.second})] += n;
	// The services no longer served: every series of theirs goes.
	for (auto it = removers_.begin(); it != removers_.end();) {
		if (now.count(it->first) || (it->first.first.empty() && it->first.second.empty())) {
			++it;
			continue;
		}
		for (auto &remove : it->second)
			remove();
		it = removers_.erase(it);
	}
	for (const auto &[k, n] : now)
		series(guarded_, {k.first, k.second}).Set(n);
}

void metrics::processes(double n)
{
	processes_->Set(n);
}

void metrics::table_cost(const service &s, double seconds)
{
	series(table_cost_, s).Increment(seconds);
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
