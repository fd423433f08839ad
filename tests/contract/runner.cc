// SPDX-License-Identifier: MIT
#include "runner.h"

#include "clauses.h"
#include "clock.h"
#include "netns.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sockbuf::contract
{

namespace
{

json failed_scenario(const std::string &name, const std::string &why,
		     const std::vector<std::string> &clauses)
{
	scenario_result r;
	r.name = name;
	r.data.errors.push_back(why);
	std::vector<verdict> vs = skipped_verdicts(name, "scenario did not finish", clauses);
	vs[0] = judge_integrity(r);
	return scenario_json(r, vs, false);
}

// In the child: run, judge, write the JSON to @fd.
[[noreturn]] void child(const scenario_spec &spec, const run_options &opt, int fd)
{
	scenario_result r;
	std::string what;
	int err = enter_fresh_netns(&what);
	std::vector<verdict> verdicts;
	if (err < 0) {
		r.name = spec.name;
		r.skip_reason =
		    fmt::format("cannot make a network namespace ({}: {})", what, strerror(-err));
	} else {
		run_scenario(spec, opt.prof, {}, &r);
	}
	verdicts = judge_scenario(r, opt.clauses);
	std::string text = scenario_json(r, verdicts, opt.series).dump();
	size_t done = 0;
	while (done < text.size()) {
		ssize_t n = write(fd, text.data() + done, text.size() - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(3);
		done += size_t(n);
	}
	_exit(0);
}

} // namespace

std::vector<verdict> judge_scenario(const scenario_result &r, const std::vector<std::string> &only)
{
	if (!r.skip_reason.empty())
		return skipped_verdicts(r.name, r.skip_reason, only);
	if (r.aborted.empty())
		return judge_all(r, only);
	// Half-built connections prove nothing about any clause: the run
	// fails on integrity (no traffic) and every clause says why.
	std::vector<verdict> v =
	    skipped_verdicts(r.name, "scenario aborted at setup: " + r.aborted, only);
	v[0] = judge_integrity(r);
	return v;
}

json run_in_namespace(const scenario_spec &spec, const run_options &opt)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return failed_scenario(spec.name, fmt::format("pipe: {}", strerror(errno)),
				       opt.clauses);
	fflush(nullptr);
	pid_t pid = fork();
	if (pid < 0)
		return failed_scenario(spec.name, fmt::format("fork: {}", strerror(errno)),
				       opt.clauses);
	if (pid == 0) {
		close(p[0]);
		child(spec, opt, p[1]);
	}
	close(p[1]);
	std::string text;
	int64_t deadline = now_ns() + int64_t(opt.timeout_s * 1e9);
	bool timed_out = false;
	for (;;) {
		int64_t left_ms = (deadline - now_ns()) / 1'000'000;
		if (left_ms <= 0) {
			timed_out = true;
			break;
		}
		pollfd pf = {p[0], POLLIN, 0};
		int n = poll(&pf, 1, int(left_ms));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			timed_out = n == 0;
			break;
		}
		char buf[65536];
		ssize_t got = read(p[0], buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		text.append(buf, size_t(got));
	}
	close(p[0]);
	if (timed_out)
		kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out)
		return failed_scenario(spec.name,
				       fmt::format("no result within {:.0f} s", opt.timeout_s),
				       opt.clauses);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return failed_scenario(
		    spec.name,
		    WIFSIGNALED(status)
			? fmt::format("scenario process killed by signal {}", WTERMSIG(status))
			: fmt::format("scenario process exited {}", WEXITSTATUS(status)),
		    opt.clauses);
	json j = json::parse(text, nullptr, false);
	if (j.is_discarded())
		return failed_scenario(spec.name, "unreadable result", opt.clauses);
	return j;
}

} // namespace sockbuf::contract
