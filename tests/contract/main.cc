// SPDX-License-Identifier: MIT
// sockbuf-contract: runs the clauses of docs/contract.md against the
// running kernel, every scenario in its own network namespace, and says
// per clause what the kernel does by itself (raw) and what sockbuf
// guarantees on top (library).
//
// Exit status: 0 no library guarantee failed (and, with --strict-raw, no
// raw property): pass, skip or unverified; 1 a clause failed or bytes went
// wrong; 77 nothing could run (the reason is printed); 2 bad usage.
#include "attempts.h"
#include "attribution.h"
#include "clauses.h"
#include "clock.h"
#include "engine.h"
#include "global.h"
#include "netns.h"
#include "outputs.h"
#include "runner.h"
#include "version.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace sockbuf::contract;

namespace
{

constexpr int exit_usage = 2, exit_skip = 77;

struct args {
	bool quick = false, strict_raw = false, list = false;
	run_options run;
	std::vector<std::string> scenarios;
	std::vector<output_target> outputs; // none given: the table on stdout
	std::string from_json;		    // render this saved document, run nothing
	std::string trace = "auto";	    // kernel events: auto, on, off
};

void usage(FILE *to)
{
	fmt::print(
	    to, "usage: sockbuf-contract [--quick] [--clause C1,C3,...] [--scenario "
		"bulk,...]\n"
		"                        [--json PATH] [--markdown PATH] [--series]\n"
		"                        [--allow-global-changes] [--strict-raw] [--list]\n"
		"                        [--trace auto|on|off] [--seed N] [--pass-cost F,S]\n"
		"                        [--version]\n"
		"\n"
		"Runs the sockbuf contract (docs/contract.md) on this kernel.  Each scenario\n"
		"runs in its own network namespace; unprivileged runs enter a user+network\n"
		"namespace first.  --allow-global-changes (or SOCKBUF_CONTRACT_ALLOW_GLOBAL=1)\n"
		"lets the memory-pressure scenario lower net.ipv4.tcp_mem: only in a "
		"throwaway\n"
		"machine such as a qemu guest.  Exit: 0 no library guarantee failed (unverified\n"
		"verdicts are listed, not failures), 1 a clause failed, 77 nothing could run.\n");
	fmt::print(to,
		   "\n"
		   "--format FMT[:PATH],...: table, markdown, json, ktap (KTAP v1, as kselftest\n"
		   "prints it) or junit (JUnit XML), each to PATH or one of them to standard\n"
		   "output (default: table).  --json PATH is --format json:PATH.\n"
		   "--from-json PATH: write the formats of a saved --json document instead of\n"
		   "running.\n"
		   "--trace auto|on|off: record kernel events through tracefs and name the ones\n"
		   "before each C3 violation (auto: when root and tracefs is there; on: exit 1\n"
		   "if it cannot; default auto).\n"
		   "--seed N: the seed of the cuts scenario's times and targets (default: from\n"
		   "the clock; each scenario's notes say the one used).\n"
		   "--pass-cost F,S: what C3's bounds allow a guard's pass, F microseconds plus\n"
		   "S per guarded socket (default 5000,20; a qemu guest without KVM: the kernel\n"
		   "matrix gives 50000,1000).  Set before the run, recorded in the JSON.\n");
}

std::vector<std::string> split(const std::string &s)
{
	std::vector<std::string> out;
	std::stringstream in(s);
	std::string item;
	while (std::getline(in, item, ','))
		if (!item.empty())
			out.push_back(item);
	return out;
}

// "F,S" -> @out; false for anything else (no unit, no sign, no overflow).
bool parse_pass_cost(const std::string &text, pass_cost *out)
{
	const auto comma = text.find(',');
	if (comma == std::string::npos)
		return false;
	auto whole = [](const std::string &t, int64_t lo, int64_t hi, int64_t *v) {
		if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos ||
		    t.size() > 12)
			return false;
		*v = std::stoll(t);
		return *v >= lo && *v <= hi;
	};
	pass_cost c;
	if (!whole(text.substr(0, comma), 1, 10'000'000, &c.fixed_us) ||
	    !whole(text.substr(comma + 1), 0, 1'000'000, &c.per_socket_us))
		return false;
	*out = c;
	return true;
}

int parse(int argc, char **argv, args *a)
{
	for (int i = 1; i < argc; i++) {
		std::string s = argv[i];
		auto value = [&](std::string *out) {
			if (i + 1 >= argc)
				return false;
			*out = argv[++i];
			return true;
		};
		std::string v;
		if (s == "--quick")
			a->quick = true;
		else if (s == "--full")
			a->quick = false;
		else if (s == "--strict-raw")
			a->strict_raw = true;
		else if (s == "--series")
			a->run.series = true;
		else if (s == "--list")
			a->list = true;
		else if (s == "--allow-global-changes")
			a->run.prof.allow_global = true;
		else if ((s == "--json" || s == "--markdown") && value(&v))
			a->outputs.push_back({s == "--json" ? "json" : "markdown", v});
		else if ((s == "--format" && value(&v)) ||
			 (s.rfind("--format=", 0) == 0 && !(v = s.substr(9)).empty())) {
			std::string err;
			if (!parse_formats(v, &a->outputs, &err)) {
				fmt::print(stderr, "sockbuf-contract: {}\n", err);
				return -1;
			}
		} else if (s == "--from-json" && value(&v))
			a->from_json = v;
		else if (s == "--trace" && value(&v) && (v == "auto" || v == "on" || v == "off"))
			a->trace = v;
		else if (s == "--seed" && value(&v)) {
			char *end = nullptr;
			errno = 0;
			a->run.prof.seed = std::strtoull(v.c_str(), &end, 0);
			if (errno || !end || *end || a->run.prof.seed == 0) {
				fmt::print(stderr, "sockbuf-contract: --seed wants a number > 0\n");
				return -1;
			}
		} else if (s == "--pass-cost" && value(&v)) {
			if (!parse_pass_cost(v, &a->run.prof.cost)) {
				fmt::print(stderr,
					   "sockbuf-contract: --pass-cost wants F,S: two whole "
					   "numbers of microseconds, F 1-10000000, S 0-1000000\n");
				return -1;
			}
		} else if (s == "--clause" && value(&v))
			a->run.clauses = split(v);
		else if (s == "--scenario" && value(&v))
			a->scenarios = split(v);
		else if (s == "-h" || s == "--help") {
			usage(stdout);
			exit(0);
		} else if (s == "--version") {
			fmt::print("{}\n", sockbuf::release::version_line("sockbuf-contract"));
			exit(0);
		} else {
			fmt::print(stderr, "sockbuf-contract: unknown or incomplete option {}\n",
				   s);
			usage(stderr);
			return -1;
		}
	}
	if (!has_stdout_target(a->outputs))
		a->outputs.push_back({"table", ""});
	const char *env = getenv("SOCKBUF_CONTRACT_ALLOW_GLOBAL");
	if (env && strcmp(env, "1") == 0)
		a->run.prof.allow_global = true;
	a->run.prof.quick = a->quick;
	if (!a->run.prof.seed)
		a->run.prof.seed = uint64_t(now_ns()) ^ (uint64_t(getpid()) << 32);
	return 0;
}

std::string sysctl_or(const char *path)
{
	std::string v;
	return read_sysctl(path, &v) == 0 ? v : "unreadable";
}

json kernel_json()
{
	utsname u = {};
	uname(&u);
	json k = {{"release", u.release}, {"version", u.version}, {"machine", u.machine}};
	return k;
}

json environment_json(const sockbuf_probe_info &p, const std::string &tcp_mem)
{
	json s;
	s["net.ipv4.tcp_rmem"] = {p.tcp_rmem[0], p.tcp_rmem[1], p.tcp_rmem[2]};
	s["net.ipv4.tcp_wmem"] = {p.tcp_wmem[0], p.tcp_wmem[1], p.tcp_wmem[2]};
	s["net.core.rmem_max"] = sysctl_or("/proc/sys/net/core/rmem_max");
	s["net.core.wmem_max"] = sysctl_or("/proc/sys/net/core/wmem_max");
	s["net.core.rmem_default"] = p.rmem_default;
	s["net.core.wmem_default"] = p.wmem_default;
	s["net.ipv4.tcp_mem"] = tcp_mem;
	s["net.ipv4.tcp_moderate_rcvbuf"] = sysctl_or("/proc/sys/net/ipv4/tcp_moderate_rcvbuf");
	s["net.ipv4.tcp_congestion_control"] =
	    sysctl_or("/proc/sys/net/ipv4/tcp_congestion_control");
	s["net.ipv4.tcp_adv_win_scale"] = sysctl_or("/proc/sys/net/ipv4/tcp_adv_win_scale");
	return s;
}

// Starts the recorder as --trace asks; @run says what it could do.
void start_trace(const args &a, bool root, sockbuf::trace::recorder *rec, trace_run *run)
{
	if (a.trace == "off") {
		run->reason = "tracing off (--trace off)";
		return;
	}
	if (!root) {
		run->reason = "not root: tracefs instances and kprobe events need root";
		return;
	}
	sockbuf::trace::recorder::install_signal_teardown();
	if (rec->start() < 0) {
		run->reason = rec->status().unavailable;
		return;
	}
	run->active = true;
	run->enabled = rec->status().enabled;
}

json trace_json(const args &a, const sockbuf::trace::recorder &rec, const trace_run &run)
{
	const auto &st = rec.status();
	json t = {{"mode", a.trace}, {"active", run.active}};
	if (!run.active)
		t["reason"] = run.reason;
	if (!st.tracefs.empty())
		t["tracefs"] = st.tracefs;
	if (st.mounted_private)
		t["mounted"] = "in a private mount namespace of this process";
	t["enabled"] = st.enabled;
	t["missing"] = st.missing;
	json f = json::object();
	for (const auto &[name, form] : st.formats)
		f[name] = form.fields;
	t["fields"] = f;
	t["clock"] = "mono";
	t["window_ms"] = double(attribution_window_ns) / 1e6;
	return t;
}

json features_json(const sockbuf_probe_info &p)
{
	json f;
	for (uint32_t bit : {SOCKBUF_FEAT_BUF_LOCK, SOCKBUF_FEAT_RCVLOWAT_RAISE,
			     SOCKBUF_FEAT_RESERVE_MEM, SOCKBUF_FEAT_FORCE, SOCKBUF_FEAT_TCP_INFO})
		f[sockbuf_feature_name(bit)] = {{"usable", (p.features & bit) != 0},
						{"known", (p.known & bit) != 0}};
	f["min_sndbuf"] = p.min_sndbuf;
	f["min_rcvbuf"] = p.min_rcvbuf;
	f["tcp_sndbuf_untouched"] = p.tcp_sndbuf;
	f["tcp_rcvbuf_untouched"] = p.tcp_rcvbuf;
	return f;
}

std::string progress_line(const json &s, int i, int n)
{
	std::string line = fmt::format("[{}/{}] {}: ", i, n, s["name"].get<std::string>());
	if (s.contains("skip_reason"))
		return line + "skipped: " + s["skip_reason"].get<std::string>();
	line += fmt::format("{:.1f} s, {:.1f} MB verified, sampler {:.0f} Hz",
			    s["seconds"].get<double>(),
			    double(s["integrity"]["bytes_verified"].get<uint64_t>()) / 1e6,
			    s["sampler"]["rate_hz"].get<double>());
	const json &in = s["integrity"];
	if (in.value("late_flows", 0) || in.value("unfinished_flows", 0))
		line += fmt::format(", drain {:.1f} s: {} flows late, {} unfinished",
				    in.value("drain_s", 0.0), in.value("late_flows", 0),
				    in.value("unfinished_flows", 0));
	for (const auto &v : s["verdicts"]) {
		std::string raw = v["raw"]["verdict"], lib = v["library"]["verdict"];
		line += fmt::format(" {}={}/{}", v["clause"].get<std::string>(), raw, lib);
	}
	return line;
}

// Runs one scenario in its own namespace and attributes its C3
// violations to the kernel events recorded meanwhile.
json run_attributed(const scenario_spec &spec, const run_options &opt,
		    sockbuf::trace::recorder *rec, trace_run *trun)
{
	std::vector<sockbuf::trace::event> events;
	uint64_t dropped_before = rec->status().dropped;
	if (trun->active)
		rec->drain(&events); // what came before this scenario is not its
	events.clear();
	json s = run_in_namespace(spec, opt);
	if (trun->active) {
		int err = rec->drain(&events);
		trun->dropped = rec->status().dropped - dropped_before;
		if (err < 0)
			fmt::print(stderr, "sockbuf-contract: reading the trace: {}\n",
				   strerror(-err));
	}
	attribute_c3(&s, events, *trun);
	return s;
}

} // namespace

static int run_main(int argc, char **argv)
{
	args a;
	if (parse(argc, argv, &a) < 0)
		return exit_usage;
	if (a.list) {
		for (const auto &s : all_scenarios())
			fmt::print("scenario {:<18} {}\n", s.name, s.summary);
		for (const auto &c : all_clauses())
			fmt::print("clause   {:<18} {}\n", c.id, c.title);
		return 0;
	}
	for (const auto &want : a.scenarios)
		if (std::none_of(all_scenarios().begin(), all_scenarios().end(),
				 [&](const scenario_spec &s) { return want == s.name; })) {
			fmt::print(stderr, "sockbuf-contract: no scenario {} (see --list)\n", want);
			return exit_usage;
		}
	for (const auto &want : a.run.clauses)
		if (std::none_of(all_clauses().begin(), all_clauses().end(),
				 [&](const clause_info &c) { return want == c.id; })) {
			fmt::print(stderr, "sockbuf-contract: no clause {} (see --list)\n", want);
			return exit_usage;
		}

	ci_options ci;
	ci.strict_raw = a.strict_raw;
	if (!a.from_json.empty()) {
		std::ifstream in(a.from_json);
		json saved = json::parse(in, nullptr, false);
		if (saved.is_discarded() || !saved.contains("scenarios")) {
			fmt::print(stderr, "sockbuf-contract: {}: not a --json document\n",
				   a.from_json);
			return exit_usage;
		}
		write_outputs(saved, a.outputs, ci);
		return exit_status_of(saved, ci);
	}

	int64_t start = now_ns();
	bool root = geteuid() == 0;
	json unpriv = json::array();
	if (a.run.prof.allow_global && root && open_global_knobs() < 0)
		fmt::print(stderr, "sockbuf-contract: net.ipv4.tcp_mem not writable: {}\n",
			   strerror(errno));
	std::string tcp_mem = sysctl_or("/proc/sys/net/ipv4/tcp_mem");
	// Before anything starts a thread: the recorder may need a mount
	// namespace of its own (tracefs not mounted).
	sockbuf::trace::recorder_options topt;
	topt.mount_private = true;
	sockbuf::trace::recorder rec(topt);
	trace_run trun;
	start_trace(a, root, &rec, &trun);
	if (a.trace == "on" && !trun.active) {
		fmt::print(stderr, "sockbuf-contract: --trace on: {}\n", trun.reason);
		return 1;
	}
	if (!root) {
		int err = enter_user_netns();
		if (err < 0) {
			fmt::print("sockbuf-contract: nothing can run: not root and no user "
				   "namespace ({})\n",
				   strerror(-err));
			return exit_skip;
		}
		unpriv.push_back("SO_SNDBUFFORCE/SO_RCVBUFFORCE need CAP_NET_ADMIN: the large "
				 "scenario stays clamped at net.core.*mem_max");
		unpriv.push_back("global net.ipv4.tcp_mem cannot be changed: no pressure scenario");
	}
	sockbuf_probe_info probe = {};
	sockbuf_probe(&probe, SOCKBUF_PROBE_FRESH);
	a.run.prof.privileged = (probe.features & SOCKBUF_FEAT_FORCE) != 0;

	json doc;
	doc["suite"] = "sockbuf-contract";
	doc["library_version"] = sockbuf_version();
	doc["profile"] = a.quick ? "quick" : "full";
	doc["privileged"] = root;
	doc["allow_global_changes"] = a.run.prof.allow_global;
	// C3's bounds were computed from these (clauses.h, --pass-cost).
	doc["pass_cost_us"] = {{"fixed", a.run.prof.cost.fixed_us},
			       {"per_socket", a.run.prof.cost.per_socket_us}};
	doc["kernel"] = kernel_json();
	doc["sysctls"] = environment_json(probe, tcp_mem);
	doc["features"] = features_json(probe);
	if (!unpriv.empty())
		doc["unprivileged_skips"] = unpriv;
	doc["trace"] = trace_json(a, rec, trun);
	doc["scenarios"] = json::array();

	std::vector<const scenario_spec *> chosen;
	for (const auto &s : all_scenarios())
		if (a.scenarios.empty() ||
		    std::find(a.scenarios.begin(), a.scenarios.end(), s.name) != a.scenarios.end())
			chosen.push_back(&s);
	// The scenario's own bound, plus what the drain may wait past its
	// base for bytes still being retransmitted (harness/engine.h).
	const drain_limits drain;
	a.run.timeout_s = (a.quick ? 30 : 120) + double(drain.cap_ns - drain.base_ns) / 1e9;

	for (size_t i = 0; i < chosen.size(); i++) {
		json s = run_with_second_attempt(
		    [&] { return run_attributed(*chosen[i], a.run, &rec, &trun); },
		    [&](const json &r, int attempt) {
			    fmt::print(stderr, "{}{}\n",
				       progress_line(r, int(i + 1), int(chosen.size())),
				       attempt > 1 ? " (second attempt)" : "");
		    });
		doc["scenarios"].push_back(std::move(s));
	}
	doc["seconds"] = double(now_ns() - start) / 1e9;
	rec.stop();

	write_outputs(doc, a.outputs, ci);
	int status = exit_status_of(doc, ci);
	if (status == exit_skip)
		fmt::print(stderr,
			   "sockbuf-contract: no scenario could run (see the reasons above)\n");
	return status;
}

int main(int argc, char **argv)
{
	// Out of memory or a JSON type error must end with a message, not abort.
	try {
		return run_main(argc, argv);
	} catch (const std::exception &e) {
		fmt::print(stderr, "sockbuf-contract: {}\n", e.what());
		return 1;
	}
}
