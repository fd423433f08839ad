// SPDX-License-Identifier: MIT
#include "cycle_watch.h"

#include "clock.h"
#include "kernel_clock.h"
#include "prog_skips.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace sockbuf::contract
{

namespace
{

// run_delay, the second field of a schedstat file, in ns; -1 unreadable.
int64_t read_run_delay(int fd)
{
	char buf[128];
	const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = nullptr;
	(void)std::strtoull(buf, &p, 10); // time on the CPU
	if (p == buf)
		return -1;
	char *q = nullptr;
	const unsigned long long delay = std::strtoull(p, &q, 10);
	return q == p ? -1 : int64_t(delay);
}

// The value of the line @key of a text file like /proc/vmstat ("key N")
// or /proc/<pid>/sched ("key : ms.nnnnnn", in ns then), read whole from
// @fd; -1 where it is missing.
int64_t read_keyed(int fd, const char *key, bool ms_fraction)
{
	char buf[16384];
	const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const size_t klen = std::strlen(key);
	for (char *line = buf; line && *line;) {
		char *next = std::strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (std::strncmp(line, key, klen) == 0 &&
		    (line[klen] == ' ' || line[klen] == ':')) {
			char *p = line + klen;
			while (*p == ' ' || *p == ':')
				p++;
			char *end = nullptr;
			const long long whole = std::strtoll(p, &end, 10);
			if (end == p)
				return -1;
			if (!ms_fraction)
				return whole;
			long long frac = 0; // six digits of ns after the point
			if (*end == '.')
				frac = std::strtoll(end + 1, nullptr, 10);
			return whole * 1'000'000 + frac;
		}
		line = next;
	}
	return -1;
}

// One reading of counter @c: @read() (-1: none), timed before and after
// it in microseconds from @t0_ns (the start rounded down, the end up,
// so the step covers the reading).  The start, for the caller's record.
template <class Counter, class Read> int64_t note_timed(Counter &c, int64_t t0_ns, Read read)
{
	const int64_t from = (now_ns() - t0_ns) / 1000;
	const int64_t v = read();
	const int64_t to = (now_ns() - t0_ns + 999) / 1000;
	if (v >= 0)
		c.note(v, from, to);
	return from;
}

std::string comm_of(int tid)
{
	char path[64];
	std::snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	const int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return {};
	char buf[32] = {};
	const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
	close(fd);
	std::string s(buf, n > 0 ? size_t(n) : 0);
	while (!s.empty() && s.back() == '\n')
		s.pop_back();
	return s;
}

} // namespace

void cycle_watch::counter::note(int64_t value, int64_t from_us, int64_t to_us)
{
	if (have && value > last)
		steps.push_back({last_from_us, to_us, value - last});
	have = true;
	last = value;
	last_from_us = from_us;
}

cycle_watch::cycle_watch(int64_t t0_ns, bool skips) : t0_ns_(t0_ns), read_skips_(skips)
{
	thp_.fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
	if (thp_.fd < 0 || read_keyed(thp_.fd, "thp_collapse_alloc", false) < 0) {
		thp_.why = "/proc/vmstat has no thp_collapse_alloc (no transparent huge pages)";
		if (thp_.fd >= 0)
			close(thp_.fd);
		thp_.fd = -1;
	} else {
		thp_.why.clear();
	}
	if (read_skips_) {
		// The base: runs skipped before the traffic are not its.
		const int64_t from = (now_ns() - t0_ns_) / 1000;
		skips_.note(int64_t(kernel_clock::get().skipped_now()), from, from);
	}
}

cycle_watch::~cycle_watch()
{
	for (auto &c : slots_)
		if (c.fd >= 0)
			close(c.fd);
	for (auto &c : blocked_)
		if (c.fd >= 0)
			close(c.fd);
	if (thp_.fd >= 0)
		close(thp_.fd);
}

void cycle_watch::add_programs(int slot, const std::vector<int> &fds, const std::string &why)
{
	if (slot < 0 || slot >= max_threads)
		return;
	counter &c = gskips_[slot];
	const int64_t base = skipped_runs(fds); // skips before are not its
	if (base < 0) {
		c.why = why.empty() ? "the guard's programs could not be read" : why;
		return;
	}
	progs_[slot] = fds;
	c.why.clear();
	const int64_t from = (now_ns() - t0_ns_) / 1000;
	c.note(base, from, from);
	live_progs_.fetch_or(1u << slot, std::memory_order_release);
}

void cycle_watch::add_thread(int slot, int tid)
{
	if (slot < 0 || slot >= max_threads)
		return;
	counter &c = slots_[slot];
	if (tid <= 0) {
		c.why = "the guard's thread was not found";
		return;
	}
	char path[64];
	std::snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	c.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (c.fd < 0) {
		c.why = fmt::format("{}: {} (a kernel without CONFIG_SCHED_INFO)", path,
				    std::strerror(errno));
		return;
	}
	if (read_run_delay(c.fd) < 0) {
		c.why = fmt::format("{}: no run-queue wait in it", path);
		close(c.fd);
		c.fd = -1;
		return;
	}
	c.why.clear();
	live_.fetch_or(1u << slot, std::memory_order_release);

	counter &b = blocked_[slot];
	std::snprintf(path, sizeof(path), "/proc/self/task/%d/sched", tid);
	b.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (b.fd < 0) {
		b.why = fmt::format("{}: {}", path, std::strerror(errno));
		return;
	}
	if (read_keyed(b.fd, "sum_block_runtime", true) < 0) {
		b.why = fmt::format("{}: no sum_block_runtime (schedstats off: boot with "
				    "schedstats=enable, or a kernel before 5.16)",
				    path);
		close(b.fd);
		b.fd = -1;
		return;
	}
	b.why.clear();
	live_blocked_.fetch_or(1u << slot, std::memory_order_release);
}

void cycle_watch::read()
{
	// Times in whole microseconds: never more than was read.
	const auto us = [](int64_t ns) { return ns < 0 ? ns : ns / 1000; };
	const unsigned live = live_.load(std::memory_order_acquire);
	const unsigned blocked = live_blocked_.load(std::memory_order_acquire);
	const unsigned progs = live_progs_.load(std::memory_order_acquire);
	for (int k = 0; k < max_threads; k++) {
		if (live & (1u << k))
			note_timed(slots_[k], t0_ns_,
				   [&] { return us(read_run_delay(slots_[k].fd)); });
		if (blocked & (1u << k))
			note_timed(blocked_[k], t0_ns_, [&] {
				return us(read_keyed(blocked_[k].fd, "sum_block_runtime", true));
			});
		if (progs & (1u << k))
			note_timed(gskips_[k], t0_ns_, [&] { return skipped_runs(progs_[k]); });
	}
	if (thp_.fd >= 0)
		note_timed(thp_, t0_ns_,
			   [&] { return read_keyed(thp_.fd, "thp_collapse_alloc", false); });
	if (read_skips_)
		last_read_us_ = note_timed(
		    skips_, t0_ns_, [] { return int64_t(kernel_clock::get().skipped_now()); });
}

std::vector<counter_step> cycle_watch::skips(uint64_t total) const
{
	std::vector<counter_step> out = skips_.steps;
	int64_t sum = 0;
	for (const auto &s : out)
		sum += s.grew;
	if (int64_t(total) > sum)
		out.push_back(
		    {last_read_us_, std::numeric_limits<int64_t>::max(), int64_t(total) - sum});
	return out;
}

std::set<int> task_ids()
{
	std::set<int> out;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return out;
	while (const dirent *e = readdir(d)) {
		const int tid = std::atoi(e->d_name);
		if (tid > 0)
			out.insert(tid);
	}
	closedir(d);
	return out;
}

int new_thread(const std::set<int> &before, const std::set<int> &after, const char *name)
{
	std::vector<int> fresh;
	for (int t : after)
		if (!before.count(t))
			fresh.push_back(t);
	if (fresh.size() == 1)
		return fresh.front();
	int found = 0;
	for (int t : fresh)
		if (comm_of(t) == name) {
			if (found)
				return 0; // two of that name: cannot tell
			found = t;
		}
	return found;
}

int64_t sched_wait_us(const std::vector<counter_step> &steps, int64_t start_us, int64_t end_us)
{
	// A step's waits ended between its two readings, one after another:
	// only the first can have begun before the step (before the dip's
	// start, if it began more than from_us - start_us earlier), and no
	// more than to_us - end_us of them can lie after the dip's end.
	int64_t sum = 0;
	for (const auto &s : steps) {
		if (s.from_us < start_us || s.from_us > end_us)
			continue;
		const int64_t after = std::max<int64_t>(0, s.to_us - end_us);
		const int64_t before = std::max<int64_t>(0, s.grew - (s.from_us - start_us));
		sum += std::max<int64_t>(0, s.grew - after - before);
	}
	return std::min(sum, std::max<int64_t>(0, end_us - start_us));
}

bool skipped_during(const std::vector<counter_step> &steps, int64_t start_us, int64_t end_us)
{
	for (const auto &s : steps)
		if (s.from_us <= end_us && s.to_us >= start_us)
			return true;
	return false;
}

} // namespace sockbuf::contract
