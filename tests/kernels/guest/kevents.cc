// SPDX-License-Identifier: MIT
#include "kevents.h"

#include "event_json.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

namespace sockbuf::kcheck
{

namespace
{

std::string ms_text(int64_t ns)
{
	char b[32];
	std::snprintf(b, sizeof(b), "%.3f", double(ns) / 1e6);
	return b;
}

// Nearest first, one per event name, at most kevents_max.
std::vector<const trace::event *> one_per_name(const std::vector<const trace::event *> &v)
{
	std::vector<const trace::event *> out;
	std::set<std::string> seen;
	for (const auto *e : v) {
		if (out.size() >= kevents_max)
			break;
		if (seen.insert(e->name).second)
			out.push_back(e);
	}
	return out;
}

std::string join(const std::vector<std::string> &v)
{
	std::string out;
	for (const auto &s : v)
		out += (out.empty() ? "" : ", ") + s;
	return out;
}

// What of our tracing setup is still there after stop(): the instance,
// and kprobe events under our name (read back from kprobe_events).
ojson leftovers(const std::string &tracefs, const std::string &instance)
{
	ojson j = {{"instance", !instance.empty() && access(instance.c_str(), F_OK) == 0}};
	std::ifstream in(tracefs + "/kprobe_events");
	if (!in) {
		j["kprobes"] = nullptr; // no kprobe_events: nothing could be left
		return j;
	}
	const std::string prefix = trace::recorder::kprobe_prefix();
	long n = 0;
	for (std::string line; std::getline(in, line);)
		n += line.find(prefix) != std::string::npos;
	j["kprobes"] = n;
	return j;
}

} // namespace

ojson attribute_below(const first_below &b, const socket_track &t,
		      const std::vector<trace::event> &events, const std::string &inactive,
		      const std::vector<std::string> &enabled, uint64_t dropped)
{
	if (b.ms < 0)
		return nullptr;
	const int64_t window = std::max(
	    kevents_min_window_ns, b.prev_mono_ns >= 0 ? b.mono_ns - b.prev_mono_ns : int64_t(0));
	ojson k = {{"t_ms", b.ms},
		   {"sndbuf", b.sndbuf},
		   {"reference", b.reference},
		   {"window_ms", double(window) / 1e6},
		   {"found", false}};
	if (!inactive.empty()) {
		k["reason"] = "no event seen: " + inactive;
		return k;
	}
	const auto near = trace::nearest_before(events, b.mono_ns, -1, t.local_port, t.remote_port,
						window, std::numeric_limits<size_t>::max());
	ojson list = ojson::array();
	for (const auto *e : one_per_name(near.same))
		list.push_back(trace::event_json(*e, t.t0_mono_ns, b.mono_ns, "socket"));
	for (const auto *e : one_per_name(near.window))
		list.push_back(trace::event_json(*e, t.t0_mono_ns, b.mono_ns, "window"));
	if (!list.empty()) {
		k["found"] = true;
		k["events"] = list;
		return k;
	}
	std::string why = "no event seen: none on this socket (" +
			  (t.local_port > 0 ? "ports " + std::to_string(t.local_port) + "->" +
						  std::to_string(t.remote_port)
					    : std::string("ports unknown")) +
			  ") before it, none naming no socket in the " + ms_text(window) +
			  " ms since the sample before (enabled: " + join(enabled) + ")";
	if (dropped)
		why += "; the trace buffer dropped " + std::to_string(dropped) + " events";
	k["reason"] = why;
	return k;
}

run_events::run_events(bool enabled)
{
	if (!enabled) {
		reason_ = "kernel events not recorded (--trace off)";
		return;
	}
	if (geteuid() != 0) {
		reason_ = "not root: a tracing instance needs CAP_SYS_ADMIN";
		return;
	}
	trace::recorder_options o;
	// Root without a mounted tracefs (the guest's init mounts it):
	// mount one in a mount namespace of this process, which has no
	// other thread between runs.
	o.mount_private = true;
	rec_ = std::make_unique<trace::recorder>(o);
	if (rec_->start() < 0) {
		reason_ = rec_->status().unavailable;
		if (reason_.empty())
			reason_ = "the recorder did not start";
	}
}

run_events::~run_events()
{
	if (rec_)
		rec_->stop();
}

bool run_events::active() const
{
	return rec_ && rec_->active();
}

ojson run_events::finish(const socket_track &sender)
{
	std::vector<trace::event> events;
	int drain_err = 0;
	if (active())
		drain_err = rec_->drain(&events);
	std::string inactive = reason_;
	if (inactive.empty() && drain_err < 0)
		inactive =
		    std::string("the trace buffer could not be read: ") + std::strerror(-drain_err);
	ojson rec = {{"active", inactive.empty()}};
	std::vector<std::string> enabled;
	uint64_t dropped = 0;
	if (rec_) {
		const auto &st = rec_->status();
		enabled = st.enabled;
		dropped = st.dropped;
		rec["tracefs"] = st.tracefs;
		rec["mounted_private"] = st.mounted_private;
		rec["enabled"] = st.enabled;
		rec["missing"] = st.missing;
		rec["dropped"] = st.dropped;
		const std::string inst = st.instance, tracefs = st.tracefs;
		rec_->stop();
		if (!tracefs.empty())
			rec["left_after_stop"] = leftovers(tracefs, inst);
	}
	rec["events"] = events.size();
	// Per event name: how many, and the first one's time in the run (ms
	// from its start), so that an event that fired but matched no dip
	// still shows.
	ojson seen = ojson::object();
	for (const auto &e : events) {
		if (!seen.contains(e.name))
			seen[e.name] = {
			    {"count", 0},
			    {"first_t_ms", sender.t0_mono_ns >= 0
					       ? ojson(double(e.time_ns - sender.t0_mono_ns) / 1e6)
					       : ojson(nullptr)}};
		seen[e.name]["count"] = seen[e.name]["count"].get<long>() + 1;
	}
	rec["seen"] = seen;
	if (!inactive.empty())
		rec["reason"] = inactive;
	ojson j = {{"recorder", rec},
		   {"sender_ports", {sender.local_port, sender.remote_port}},
		   {"below_initial", attribute_below(sender.snd_below_initial, sender, events,
						     inactive, enabled, dropped)},
		   {"below_floor", attribute_below(sender.snd_below_floor, sender, events, inactive,
						   enabled, dropped)}};
	return j;
}

} // namespace sockbuf::kcheck
