// SPDX-License-Identifier: MIT
// Kernel events through tracefs, without BPF: a tracing instance of our
// own (instances/sockbuf-<pid>, the global buffer is never touched) with
// the tracepoints sock:sock_exceed_buf_limit and sock:inet_sock_set_state
// and kprobe events on the shrink and clamp paths of TCP buffers, read
// back and parsed into events.  Whatever the kernel lacks (tracefs,
// permission, an event, a function) is reported and left out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sockbuf::trace
{

// An event's `format` file: its name, id and fields (the common_* fields
// left out).  Fields differ between kernels: read them, never assume.
struct event_format {
	std::string name;
	int id = -1;
	std::vector<std::string> fields;
	std::string print_fmt;
	bool has(const std::string &field) const;
};

// false when @text is not a format file (no name line).
bool parse_format(const std::string &text, event_format *out);

struct event {
	int64_t time_ns = 0; // trace_clock mono: comparable with CLOCK_MONOTONIC
	std::string name;    // "sock:sock_exceed_buf_limit", "kprobe:tcp_clamp_window"
	int pid = -1, cpu = -1;
	uint64_t sk = 0;			   // struct sock address, 0 if the event has none
	int sport = -1, dport = -1;		   // host order, -1 if the event has none
	std::map<std::string, std::string> fields; // as printed
};

// key=value and key:value words of an event's printed payload, in order
// of appearance; a value runs to the next space (sysctl_mem=1,2,3 is one).
std::map<std::string, std::string> parse_fields(const std::string &payload);

// One line of a tracefs `trace` or `trace_pipe` file.  @names maps the
// event name as printed to the name an event gets ("sock_exceed_buf_limit"
// -> "sock:sock_exceed_buf_limit"); lines of other events, comments and
// headers give nothing.
std::optional<event> parse_line(const std::string &line,
				const std::map<std::string, std::string> &names);
std::vector<event> parse_trace(const std::string &text,
			       const std::map<std::string, std::string> &names);

struct recorder_options {
	size_t buffer_kb = 4096; // per CPU
	bool set_state = true;	 // sock:inet_sock_set_state (ports of connections)
	// Non-inline functions taking struct sock * first; each one missing
	// from available_filter_functions is reported and skipped.
	// __sk_mem_raise_allocated runs on every charge and would fill the
	// buffer: its failures are sock:sock_exceed_buf_limit.
	std::vector<std::string> kprobes = {"tcp_enter_memory_pressure", "sk_stream_wait_memory",
					    "tcp_clamp_window", "tcp_sndbuf_expand"};
	// Root without a mounted tracefs: unshare the mount namespace of the
	// calling process (single-threaded only) and mount one there.
	bool mount_private = false;
};

struct recorder_status {
	std::string tracefs;		  // where it was found ("" none)
	std::string instance;		  // our instance directory
	bool mounted_private = false;	  // mount_private was used
	std::string unavailable;	  // non-empty: nothing is recorded, why
	std::vector<std::string> enabled; // event names as in event::name
	std::vector<std::string> missing; // "kprobe:f: not in available_filter_functions"
	std::map<std::string, event_format> formats; // by event::name
	uint64_t dropped = 0;			     // events the full buffer lost
};

// One recorder per process at a time.  start() then drain() as often as
// wanted, then stop() (the destructor stops too).  Teardown disables every
// event it enabled, deletes its instance and removes its kprobe events;
// install_signal_teardown() makes SIGINT and SIGTERM do the same before
// the process dies of the signal.
class recorder
{
public:
	explicit recorder(recorder_options opt = {});
	~recorder();
	recorder(const recorder &) = delete;
	recorder &operator=(const recorder &) = delete;

	// 0 when at least one event is enabled, else -errno with
	// status().unavailable saying why.
	int start();
	// Events recorded since start() or the last drain(), oldest first;
	// they leave the buffer.  Bounded in bytes and time.  0 or -errno.
	int drain(std::vector<event> *out);
	void stop();
	bool active() const { return active_; }
	const recorder_status &status() const { return st_; }

	// The name prefix of this process's kprobe events: "sockbuf_<pid>_".
	static std::string kprobe_prefix();
	// Install before start(): a signal that comes while start() runs is
	// held until its teardown plan is complete, then handled.
	static void install_signal_teardown();

private:
	recorder_options opt_;
	recorder_status st_;
	bool active_ = false;
	std::map<std::string, std::string> names_; // printed name -> event name
	std::vector<std::string> enable_paths_;
	std::vector<std::string> kprobe_names_;
	void fail(const std::string &why);
	int start_blocked();
};

// Where tracefs is mounted ("" if nowhere): /sys/kernel/tracing, else
// /sys/kernel/debug/tracing.
std::string find_tracefs();

// What may explain something seen at @at_ns on the socket whose local and
// remote ports are @sport and @dport (as its own events carry them; -1:
// unknown): @same, the events on that socket at or after @since_ns (-1:
// any time); @window, the events naming no socket in the @window_ns before
// @at_ns.  Nothing after @at_ns; each list nearest first, at most @max.
struct nearest_events {
	std::vector<const event *> same, window;
};

template <class Events>
nearest_events nearest_before(const Events &events, int64_t at_ns, int64_t since_ns, int sport,
			      int dport, int64_t window_ns, size_t max)
{
	nearest_events out;
	for (const event &e : events) {
		if (e.time_ns > at_ns)
			continue;
		if (e.sport >= 0) {
			if (sport >= 0 && e.sport == sport && e.dport == dport &&
			    e.time_ns >= since_ns)
				out.same.push_back(&e);
		} else if (at_ns - e.time_ns <= window_ns) {
			out.window.push_back(&e);
		}
	}
	for (auto *v : {&out.same, &out.window}) {
		std::sort(v->begin(), v->end(),
			  [](const event *a, const event *b) { return a->time_ns > b->time_ns; });
		if (v->size() > max)
			v->resize(max);
	}
	return out;
}

} // namespace sockbuf::trace
