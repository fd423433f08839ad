// SPDX-License-Identifier: MIT
// take_socket() (take.h): pidfd_getfd() of another process's socket that
// keeps the socket's net_cls classid and net_prio index.
#include "take.h"

#include <fmt/core.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <mutex>
#include <sched.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace sockbuf::cli::remote
{

namespace
{

thread_local std::string note;

// Helpers still running: each can sleep in the close of a socket the
// owner swapped in during the take (its last close, with SO_LINGER).
std::atomic<int> helpers{0};
constexpr int max_helpers = 16;

const char *const controllers[] = {"net_cls", "net_prio"};

bool has_controller(const std::string &list, const char *c)
{
	std::stringstream in(list);
	std::string one;
	while (std::getline(in, one, ','))
		if (one == c)
			return true;
	return false;
}

// The v1 cgroup paths of net_cls and net_prio in /proc/... @file ("" where
// that controller has no v1 hierarchy mounted); false if unreadable.
bool paths_of(const std::string &file, std::string out[2])
{
	std::ifstream in(file);
	if (!in)
		return false;
	std::string line;
	while (std::getline(in, line)) {
		const size_t a = line.find(':');
		const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
		if (b == std::string::npos)
			continue;
		const std::string list = line.substr(a + 1, b - a - 1);
		for (int i = 0; i < 2; i++)
			if (has_controller(list, controllers[i]))
				out[i] = line.substr(b + 1);
	}
	return true;
}

// The `tasks` file of v1 cgroup @path of controller @c, from this mount
// namespace's mountinfo; "" (and @why) if none can be named.
std::string tasks_file(const char *c, const std::string &path, std::string *why)
{
	std::ifstream in("/proc/self/mountinfo");
	std::string line;
	while (std::getline(in, line)) {
		const size_t dash = line.find(" - ");
		if (dash == std::string::npos)
			continue;
		std::stringstream tail(line.substr(dash + 3));
		std::string fstype, source, opts;
		tail >> fstype >> source >> opts;
		if (fstype != "cgroup" || !has_controller(opts, c))
			continue;
		std::stringstream head(line.substr(0, dash));
		std::string id, parent, dev, root, point;
		head >> id >> parent >> dev >> root >> point;
		if (point.find('\\') != std::string::npos)
			continue; // an escaped name: not one a cgroup mount gets
		if (root == "/")
			root.clear();
		if (path.compare(0, root.size(), root) != 0)
			continue;
		return point + path.substr(root.size()) + "/tasks";
	}
	*why = fmt::format("no {} cgroup mount here", c);
	return "";
}

struct stamp {
	std::mutex m;
	std::condition_variable cv;
	bool done = false;
	std::string why;
};

// On its own thread: a file table with only @pidfd, the owner's cgroups
// joined, the socket taken again; @s told before any close that could be
// the socket's last.
void restamp(const std::shared_ptr<stamp> &s, int pidfd, int fd, uint64_t cookie,
	     const std::vector<std::string> &tasks)
{
	std::string why;
	int got = -1;
	if (unshare(CLONE_FILES) != 0) {
		why = fmt::format("unshare(CLONE_FILES): {}", std::strerror(errno));
	} else {
		if (pidfd > 0)
			syscall(SYS_close_range, 0u, unsigned(pidfd) - 1, 0u);
		syscall(SYS_close_range, unsigned(pidfd) + 1, ~0u, 0u);
		const std::string tid = std::to_string(gettid());
		for (const std::string &t : tasks) {
			const int w = open(t.c_str(), O_WRONLY | O_CLOEXEC);
			if (w < 0 || write(w, tid.data(), tid.size()) != ssize_t(tid.size())) {
				why = fmt::format("{}: {}", t, std::strerror(errno));
				if (w >= 0)
					close(w);
				break;
			}
			close(w);
		}
		if (why.empty()) {
			got = int(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
			uint64_t c = 0;
			socklen_t len = sizeof(c);
			if (got < 0)
				why = fmt::format("pidfd_getfd: {}", std::strerror(errno));
			else if (getsockopt(got, SOL_SOCKET, SO_COOKIE, &c, &len) != 0 ||
				 c != cookie)
				why = "the descriptor names another socket now";
			else
				close(got); // the taker's copy holds it: not the last close
		}
	}
	{
		const std::lock_guard<std::mutex> l(s->m);
		s->why = why;
		s->done = true;
	}
	s->cv.notify_one();
	// Another socket, taken only by a swap in between, is closed as this
	// thread ends (its last close, maybe a long one, here only).
	helpers--;
}

// Whether this host has a v1 net_cls or net_prio cgroup other than a
// hierarchy's root (/proc/cgroups: a hierarchy and more than one
// cgroup), read when the program starts and again at most every ten
// seconds: where it has none (cgroup v2, or no such cgroup made), every
// process is in the same one and a take costs no call more than
// pidfd_getfd().
std::atomic<int64_t> v1_checked_ns{-1};
std::atomic<bool> v1_present{false};

int64_t now_ns()
{
	struct timespec ts = {};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool v1_cgroups()
{
	const int64_t now = now_ns();
	const int64_t last = v1_checked_ns.load();
	if (last < 0 || now - last >= 10 * int64_t(1000000000)) {
		bool any = false;
		std::ifstream in("/proc/cgroups");
		std::string name;
		long hierarchy = 0, cgroups = 0, enabled = 0;
		std::string line;
		while (std::getline(in, line)) {
			std::stringstream cols(line);
			if (cols >> name >> hierarchy >> cgroups >> enabled &&
			    (name == controllers[0] || name == controllers[1]) && hierarchy != 0 &&
			    cgroups > 1)
				any = true;
		}
		v1_present = any;
		v1_checked_ns = now;
	}
	return v1_present;
}

const bool primed = v1_cgroups();

} // namespace

std::string class_note()
{
	return note;
}

int take_socket(int pidfd, pid_t pid, int fd)
{
	note.clear();
	const int dup = int(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
	if (dup < 0)
		return -1;
	std::string owner[2], self[2];
	if (!v1_cgroups() || !paths_of(fmt::format("/proc/{}/cgroup", pid), owner) ||
	    (owner[0].empty() && owner[1].empty()) || !paths_of("/proc/thread-self/cgroup", self) ||
	    (owner[0] == self[0] && owner[1] == self[1]))
		return dup; // nothing to keep (or nothing known to keep)
	std::vector<std::string> tasks;
	std::string why;
	for (int i = 0; i < 2 && why.empty(); i++) {
		if (owner[i].empty() || owner[i] == self[i])
			continue;
		std::string t = tasks_file(controllers[i], owner[i], &why);
		if (!t.empty() && (tasks.empty() || tasks.back() != t))
			tasks.push_back(std::move(t)); // net_cls,net_prio mounted as one
	}
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	if (why.empty() && getsockopt(dup, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0)
		why = fmt::format("SO_COOKIE: {}", std::strerror(errno));
	if (why.empty() && ++helpers > max_helpers) {
		helpers--;
		why = fmt::format("{} takes still closing", max_helpers);
	}
	if (why.empty()) {
		auto s = std::make_shared<stamp>();
		try {
			std::thread(restamp, s, pidfd, fd, cookie, std::move(tasks)).detach();
			std::unique_lock<std::mutex> l(s->m);
			s->cv.wait(l, [&] { return s->done; });
			why = s->why;
		} catch (const std::system_error &e) {
			helpers--;
			why = fmt::format("thread: {}", e.what());
		}
	}
	note = why;
	return dup;
}

} // namespace sockbuf::cli::remote
