// SPDX-License-Identifier: MIT
// Prints, per kernel feature set, the setsockopt/getsockopt calls each
// public call makes on an unconnected TCP socket (a Markdown table for
// docs/performance.md).  Older kernels are emulated through the library's
// syscall seam (sockbuf_testable): the option an old kernel lacks answers
// ENOPROTOOPT, to the probe and to the calls alike.  On this kernel's own
// feature set the list equals what strace shows.
#include <sockbuf/sockbuf.h>
#include <sys.h>

#include <cerrno>
#include <cstdio>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace
{

struct feature_set {
	const char *name;
	bool buf_lock, rcvlowat, tcp_info;
};

const feature_set *g_set = nullptr;
std::vector<std::string> g_log;
bool g_recording = false;

std::string opt_name(int level, int name)
{
	if (level == IPPROTO_TCP && name == TCP_INFO)
		return "TCP_INFO";
	if (level == IPPROTO_TCP && name == TCP_WINDOW_CLAMP)
		return "TCP_WINDOW_CLAMP";
	if (level == IPPROTO_TCP)
		return "tcp:" + std::to_string(name);
	switch (name) {
	case SO_SNDBUF:
		return "SO_SNDBUF";
	case SO_RCVBUF:
		return "SO_RCVBUF";
	case SO_BUF_LOCK:
		return "SO_BUF_LOCK";
	case SO_RCVLOWAT:
		return "SO_RCVLOWAT";
	case SO_PROTOCOL:
		return "SO_PROTOCOL";
	case SO_DOMAIN:
		return "SO_DOMAIN";
	case SO_TYPE:
		return "SO_TYPE";
	case SO_RESERVE_MEM:
		return "SO_RESERVE_MEM";
	case SO_SNDBUFFORCE:
		return "SO_SNDBUFFORCE";
	case SO_RCVBUFFORCE:
		return "SO_RCVBUFFORCE";
	default:
		return "sol:" + std::to_string(name);
	}
}

// ENOPROTOOPT for what this feature set's kernel does not have.
bool missing(int level, int name)
{
	if (level == SOL_SOCKET && name == SO_BUF_LOCK)
		return !g_set->buf_lock;
	if (level == SOL_SOCKET && name == SO_RCVLOWAT)
		return !g_set->rcvlowat;
	if (level == IPPROTO_TCP && name == TCP_INFO)
		return !g_set->tcp_info;
	return false;
}

int hook_get(int, int level, int name, void *, socklen_t *len)
{
	if (g_recording)
		g_log.push_back("get " + opt_name(level, name) +
				(level == IPPROTO_TCP ? "(" + std::to_string(*len) + ")" : ""));
	return missing(level, name) ? -ENOPROTOOPT : sockbuf::sys::pass;
}

int hook_set(int, int level, int name, const void *, socklen_t)
{
	if (g_recording)
		g_log.push_back("set " + opt_name(level, name));
	return missing(level, name) ? -ENOPROTOOPT : sockbuf::sys::pass;
}

const sockbuf::sys::hooks g_hooks = {hook_get, hook_set, nullptr, nullptr};

void row(const char *call, int ret)
{
	std::string seq;
	for (const auto &s : g_log)
		seq += (seq.empty() ? "" : ", ") + s;
	std::printf("| %s | %s | %zu | %s%s |\n", g_set->name, call, g_log.size(), seq.c_str(),
		    ret < 0 ? (" -> " + std::to_string(ret)).c_str() : "");
	g_log.clear();
}

} // namespace

int main()
{
	const feature_set sets[] = {
	    {"SO_BUF_LOCK + TCP_INFO (5.15+)", true, true, true},
	    {"SO_RCVLOWAT raise, no SO_BUF_LOCK (4.18-5.14)", false, true, true},
	    {"neither (before 4.18)", false, false, true},
	    {"SO_BUF_LOCK, no TCP_INFO", true, true, false},
	};
	sockbuf::sys::set_hooks(&g_hooks);
	std::printf("| feature set | call | syscalls | sequence |\n|---|---|---|---|\n");
	for (const auto &set : sets) {
		g_set = &set;
		sockbuf_probe(nullptr, SOCKBUF_PROBE_FRESH);
		int fd = ::socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return 1;
		// Without SO_BUF_LOCK the send side has no unlocked mechanism:
		// show the sequence of the fallback a caller would choose.
		const unsigned int initial_flags = set.buf_lock ? 0u : SOCKBUF_F_FALLBACK_LOCK;
		struct sockbuf_report rep;
		struct sockbuf_state st;
		const struct sockbuf_floor floor = {131072, 131072};
		g_recording = true;
		row("set_initial(snd, rcv)",
		    sockbuf_set_initial_bufsize(fd, 262144, 262144, initial_flags, &rep));
		row("set_initial(0, rcv)",
		    sockbuf_set_initial_bufsize(fd, 0, 262144, initial_flags, &rep));
		row("lock(snd, rcv)", sockbuf_lock_bufsize(fd, 262144, 262144, 0, &rep));
		row("get_state", sockbuf_get_state(fd, &st));
		row("check_floor(floor, NULL)", sockbuf_check_floor(fd, &floor, nullptr));
		row("check_floor(floor, &state)", sockbuf_check_floor(fd, &floor, &st));
		// lock left both above the floor; then both pushed below it
		// (a plain setsockopt, not recorded).
		row("restore_floor, nothing below",
		    sockbuf_restore_floor(fd, &floor, initial_flags, &rep));
		const int small = 4096;
		g_recording = false;
		::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		g_recording = true;
		row("restore_floor, both below",
		    sockbuf_restore_floor(fd, &floor, initial_flags, &rep));
		g_recording = false;
		::close(fd);
	}
	sockbuf::sys::set_hooks(nullptr);
	return 0;
}
