// SPDX-License-Identifier: MIT
#include "show_trace.h"

#include "trace.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace sockbuf::cli::show
{

namespace
{

constexpr int64_t keep_ns = 10'000'000'000;
constexpr size_t keep_events = 20000;
constexpr size_t shown_per_drop = 4;

std::string describe(const trace::event &ev, int64_t seen_ns)
{
	std::string line =
	    fmt::format("{:.2f} ms before: {}", double(seen_ns - ev.time_ns) / 1e6, ev.name);
	if (ev.sport >= 0)
		line += fmt::format(" ports {}/{}", ev.sport, ev.dport);
	size_t n = 0;
	for (const auto &[k, v] : ev.fields) {
		if (k == "sport" || k == "dport" || k == "sk" || n == 4)
			continue;
		line += fmt::format(" {}={}", k, v);
		n++;
	}
	return line;
}

} // namespace

bool parse_trace_mode(const char *text, trace_mode *out)
{
	if (!std::strcmp(text, "auto"))
		*out = trace_mode::autodetect;
	else if (!std::strcmp(text, "on"))
		*out = trace_mode::on;
	else if (!std::strcmp(text, "off"))
		*out = trace_mode::off;
	else
		return false;
	return true;
}

watch_tracer::watch_tracer() = default;
watch_tracer::~watch_tracer() = default;

int watch_tracer::start(trace_mode mode, std::FILE *to)
{
	if (mode == trace_mode::off) {
		why_not_ = "not asked for (--trace off)";
		return 0;
	}
	if (geteuid() != 0) {
		why_not_ = "tracing needs root";
	} else {
		trace::recorder_options opt;
		// The watch is single-threaded: it may mount a tracefs of its own
		// in a private mount namespace when none is mounted.
		opt.mount_private = true;
		auto rec = std::make_unique<trace::recorder>(opt);
		trace::recorder::install_signal_teardown();
		if (rec->start() == 0) {
			std::string what;
			for (const auto &n : rec->status().enabled)
				what += (what.empty() ? "" : ", ") + n;
			fmt::print(to, "kernel events: recording {}", what);
			// Each one not recorded, named with its reason.
			for (const auto &m : rec->status().missing)
				fmt::print(to, "; unavailable: {}", m);
			fmt::print(to, "\n");
			rec_ = std::move(rec);
			return 0;
		}
		why_not_ = rec->status().unavailable;
	}
	fmt::print(to, "kernel events: not recorded: {}\n", why_not_);
	return mode == trace_mode::on ? -EPERM : 0;
}

void watch_tracer::collect()
{
	if (!rec_)
		return;
	std::vector<trace::event> fresh;
	if (rec_->drain(&fresh) < 0)
		return;
	for (auto &ev : fresh)
		recent_.push_back(std::move(ev));
	const int64_t newest = recent_.empty() ? 0 : recent_.back().time_ns;
	while (!recent_.empty() &&
	       (recent_.size() > keep_events || recent_.front().time_ns < newest - keep_ns))
		recent_.pop_front();
}

void watch_tracer::explain(const drop_event &e, int64_t ok_mono_ns, int64_t seen_mono_ns,
			   std::FILE *to) const
{
	if (!rec_) {
		if (!why_not_.empty())
			fmt::print(to, "    kernel: no events ({})\n", why_not_);
		return;
	}
	// The socket's own events carry its local port first.
	const trace::nearest_events near = trace::nearest_before(
	    recent_, seen_mono_ns, ok_mono_ns, e.local_port ? e.local_port : -1, e.remote_port,
	    1'000'000, shown_per_drop);
	const auto &own = near.same;
	const auto &pick = own.empty() ? near.window : own;
	if (pick.empty()) {
		fmt::print(to,
			   "    kernel: no event on this socket between the samples, none "
			   "naming no socket in the millisecond before ({} held, {} dropped)\n",
			   recent_.size(), rec_->status().dropped);
		return;
	}
	fmt::print(to, "    kernel ({}):\n",
		   own.empty() ? "events naming no socket, same millisecond" : "this socket");
	for (auto it = pick.rbegin(); it != pick.rend(); ++it) // the nearest last
		fmt::print(to, "      {}\n", describe(**it, seen_mono_ns));
}

} // namespace sockbuf::cli::show
