// SPDX-License-Identifier: MIT
// `sockbuf show` against sockets this test opened with known sizes and
// locks, against a child process's floors, and the diagnosis wording
// against synthetic sockets.
#include "floor_read.h"
#include "show_check.h"
#include "show_diagnose.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace sockbuf::cli::show;

namespace
{

std::string run(const std::string &cmd)
{
	std::string out;
	FILE *p = popen(cmd.c_str(), "r");
	if (!p)
		return out;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		out.append(buf, n);
	pclose(p);
	return out;
}

int get_int(int fd, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	getsockopt(fd, SOL_SOCKET, name, &v, &len);
	return v;
}

int set_int(int fd, int name, int v)
{
	return setsockopt(fd, SOL_SOCKET, name, &v, sizeof(v));
}

struct sockets {
	int listener = -1, client = -1, accepted = -1, unlocked = -1;
	~sockets()
	{
		for (int fd : {listener, client, accepted, unlocked})
			if (fd >= 0)
				close(fd);
	}
};

// A listener locked at 128 KB (receive), a client left alone, the
// accepted socket that inherits the lock, and a socket set with
// set_initial (256 KB, unlocked).
void open_sockets(sockets *s)
{
	s->listener = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_EQ(set_int(s->listener, SO_RCVBUF, 131072), 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(bind(s->listener, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	ASSERT_EQ(listen(s->listener, 4), 0);
	socklen_t len = sizeof(a);
	getsockname(s->listener, reinterpret_cast<sockaddr *>(&a), &len);
	s->client = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_EQ(connect(s->client, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	s->accepted = accept(s->listener, nullptr, nullptr);
	ASSERT_GE(s->accepted, 0);
	s->unlocked = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_EQ(sockbuf_set_initial_bufsize(s->unlocked, 0, 262144, 0, nullptr), 0);
	ASSERT_EQ(get_int(s->unlocked, SO_BUF_LOCK), 0);
}

} // namespace

TEST(Show, JsonMatchesTheKernelsViewOfOurSockets)
{
	sockets s;
	ASSERT_NO_FATAL_FAILURE(open_sockets(&s));
	std::string out = run(std::string(SOCKBUF_TOOL " show --json ") + std::to_string(getpid()));
	auto j = nlohmann::json::parse(out, nullptr, false);
	ASSERT_FALSE(j.is_discarded()) << out;
	std::map<int, nlohmann::json> by_fd;
	for (const auto &e : j["sockets"])
		by_fd[e["fd"].get<int>()] = e;
	// The unbound, unconnected socket is in CLOSE: inet_diag does not list it.
	for (int fd : {s.listener, s.client, s.accepted}) {
		ASSERT_TRUE(by_fd.count(fd)) << "fd " << fd << " missing: " << out;
		const auto &e = by_fd[fd];
		EXPECT_EQ(e["sndbuf"].get<int>(), get_int(fd, SO_SNDBUF)) << fd;
		EXPECT_EQ(e["rcvbuf"].get<int>(), get_int(fd, SO_RCVBUF)) << fd;
		EXPECT_EQ(e["lock_bits"].get<int>(), get_int(fd, SO_BUF_LOCK)) << fd;
	}
	const auto &l = by_fd[s.listener];
	EXPECT_EQ(l["state"], "LISTEN");
	EXPECT_EQ(l["rcvbuf"].get<int>(), 262144);
	EXPECT_EQ(l["lock"]["rcv"], true);
	EXPECT_EQ(l["lock"]["snd"], false);
	EXPECT_EQ(l["problem"], true);

	const auto &acc = by_fd[s.accepted];
	EXPECT_EQ(acc["state"], "ESTABLISHED");
	EXPECT_EQ(acc["lock"]["rcv"], true) << "inherited from the listener";
	EXPECT_EQ(acc["problem"], true);
	std::string first = acc["diagnosis"][0];
	EXPECT_EQ(first.rfind("receive buffer locked at 256 KB: ", 0), 0u) << first;
	EXPECT_NE(first.find("50 ms RTT"), std::string::npos) << first;
	EXPECT_NE(first.find("near 5 MB/s"), std::string::npos) << first;
	EXPECT_NE(first.find("unlocked it could reach tcp_rmem[2] = "), std::string::npos) << first;
	EXPECT_NE(acc["diagnosis"].dump().find("window scale"), std::string::npos)
	    << "a locked 256 KB listener gives a small window scale: " << acc["diagnosis"].dump();

	const auto &c = by_fd[s.client];
	EXPECT_EQ(c["lock_bits"].get<int>(), 0);
	EXPECT_EQ(c["problem"], false);
	EXPECT_EQ(c["diagnosis"][0].get<std::string>().rfind("unlocked: autotuning on", 0), 0u);
}

TEST(Show, TextNamesTheLockedSocket)
{
	sockets s;
	ASSERT_NO_FATAL_FAILURE(open_sockets(&s));
	std::string out = run(std::string(SOCKBUF_TOOL " show ") + std::to_string(getpid()));
	EXPECT_NE(out.find("fd " + std::to_string(s.accepted) + "  ESTABLISHED"), std::string::npos)
	    << out;
	EXPECT_NE(out.find("lock rcv"), std::string::npos) << out;
	EXPECT_NE(out.find("- receive buffer locked at 256 KB"), std::string::npos) << out;
}

TEST(Show, AllListsOurSocketsToo)
{
	sockets s;
	ASSERT_NO_FATAL_FAILURE(open_sockets(&s));
	auto j = nlohmann::json::parse(run(SOCKBUF_TOOL " show --all --json"), nullptr, false);
	ASSERT_FALSE(j.is_discarded());
	int ours = 0;
	for (const auto &e : j["sockets"])
		if (e["pid"].get<int>() == getpid())
			ours++;
	EXPECT_GE(ours, 3);
}

TEST(Show, BadArgumentsAndMissingProcess)
{
	// One line saying what was wrong, not the whole help.
	EXPECT_EQ(run(SOCKBUF_TOOL " show 2>&1"),
		  "sockbuf show: which process? give a PID (or several) or --all (sockbuf show "
		  "--help)\n");
	EXPECT_EQ(run(SOCKBUF_TOOL " show 1x 2>&1"),
		  "sockbuf show: '1x' is not a process id (sockbuf show --help)\n");
	EXPECT_NE(run(SOCKBUF_TOOL " show 4194000 2>&1").find("/proc/4194000/fd"),
		  std::string::npos);
}

// The diagnosis wording on synthetic sockets.

namespace
{
shown_socket established(int rcvbuf, int sndbuf, int lock, uint32_t rtt_us, int rcv_wscale)
{
	shown_socket s;
	s.info.state = TCP_ESTABLISHED;
	s.info.rcvbuf = rcvbuf;
	s.info.sndbuf = sndbuf;
	s.info.has_tcp_info = true;
	s.info.rtt_us = rtt_us;
	s.info.rcv_wscale = rcv_wscale;
	s.info.snd_wscale = 7;
	s.lock = lock;
	return s;
}

net_limits limits()
{
	net_limits l;
	l.tcp_rmem[2] = 32 << 20;
	l.tcp_wmem[2] = 4 << 20;
	l.rcvbuf_max = l.sndbuf_max = 8 << 20;
	return l;
}
} // namespace

TEST(ShowDiagnose, LockedReceiveAt50ms)
{
	auto d = diagnose(established(262144, 87380, SOCKBUF_RCV, 50000, 10), limits());
	ASSERT_FALSE(d.lines.empty());
	EXPECT_TRUE(d.problem);
	EXPECT_EQ(d.lines[0],
		  "receive buffer locked at 256 KB: at the measured 50 ms RTT this caps "
		  "the connection near 5 MB/s; unlocked it could reach tcp_rmem[2] = "
		  "32 MB");
}

TEST(ShowDiagnose, LockedSendAndSmallWindowScale)
{
	auto d = diagnose(established(131072, 131072, SOCKBUF_BOTH, 10000, 1), limits());
	EXPECT_TRUE(d.problem);
	ASSERT_GE(d.lines.size(), 3u);
	EXPECT_EQ(d.lines[1].rfind("send buffer locked at 128 KB", 0), 0u) << d.lines[1];
	EXPECT_NE(d.lines[1].find("tcp_wmem[2] = 4 MB"), std::string::npos) << d.lines[1];
	EXPECT_EQ(d.lines[2].rfind("window scale 1 (fixed at the handshake) limits the receive "
				   "window to 128 KB",
				   0),
		  0u)
	    << d.lines[2];
}

TEST(ShowDiagnose, UnlockedAndUnknown)
{
	auto ok = diagnose(established(6 << 20, 4 << 20, 0, 50000, 10), limits());
	EXPECT_FALSE(ok.problem);
	ASSERT_EQ(ok.lines.size(), 1u);
	EXPECT_EQ(ok.lines[0], "unlocked: autotuning on (receive 6 MB of at most 32 MB, send 4 MB "
			       "of at most 4 MB)");
	auto s = established(262144, 87380, -1, 50000, 10);
	s.lock_note = "pidfd_getfd: Operation not permitted";
	auto unknown = diagnose(s, limits());
	EXPECT_FALSE(unknown.problem);
	ASSERT_EQ(unknown.lines.size(), 1u);
	EXPECT_EQ(unknown.lines[0], "lock bits unknown (pidfd_getfd: Operation not permitted): "
				    "cannot tell whether autotuning is on");
}

TEST(ShowDiagnose, ListenerLockedSpeaksOfAcceptedConnections)
{
	shown_socket s;
	s.info.state = TCP_LISTEN;
	s.info.rcvbuf = 262144;
	s.info.sndbuf = 16384;
	s.lock = SOCKBUF_RCV;
	auto d = diagnose(s, limits());
	ASSERT_FALSE(d.lines.empty());
	EXPECT_EQ(d.lines[0],
		  "receive buffer locked at 256 KB: at 50 ms RTT this caps every "
		  "accepted connection near 5 MB/s; unlocked it could reach tcp_rmem[2] "
		  "= 32 MB");
}

TEST(ShowDiagnose, Units)
{
	EXPECT_EQ(human_size(1000), "1000 bytes");
	EXPECT_EQ(human_size(4608), "4.5 KB");
	EXPECT_EQ(human_size(262144), "256 KB");
	EXPECT_EQ(human_size(3939840), "3.8 MB");
	EXPECT_EQ(human_rate(262144 / 0.05), "5 MB/s");
}

// Floors published by another process (impl/internal/floor_registry.h): a child
// with a floor guard over loopback connections pushes one send buffer
// below its floor on command; show must flag exactly that socket.

namespace
{

struct floor_child {
	pid_t pid = -1;
	int cmd = -1, reply = -1; // pipes to and from the child
	int fd_a = -1, fd_b = -1, fd_acc = -1, floor = 0;
	~floor_child()
	{
		if (cmd >= 0)
			close(cmd); // EOF: the child leaves
		if (pid > 0)
			waitpid(pid, nullptr, 0);
		if (reply >= 0)
			close(reply);
	}
};

int set_initial(int fd, struct sockbuf_floor *floor)
{
	struct sockbuf_report rep;
	int ret = sockbuf_set_initial_bufsize(fd, 131072, 131072, 0, &rep);
	if (ret == 0 && floor)
		sockbuf_report_floor(&rep, floor);
	return ret;
}

// The child: a listener, two connections (a, b) and the socket accepted
// for a, all with a 128 KB initial size and a floor in a guard that never
// runs a pass.  'd' drops a's send buffer (SO_SNDBUF 1024, then unlocked
// again with SO_BUF_LOCK 0) and answers its new size.
[[noreturn]] void child_main(int cmd, int reply)
{
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	struct sockbuf_floor floor = {};
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int fa = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int fb = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = set_initial(l, nullptr) == 0 && set_initial(fa, &floor) == 0 &&
		  set_initial(fb, nullptr) == 0 &&
		  bind(l, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0 && listen(l, 4) == 0 &&
		  getsockname(l, reinterpret_cast<sockaddr *>(&a), &len) == 0 &&
		  connect(fa, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
	int acc = ok ? accept4(l, nullptr, nullptr, SOCK_CLOEXEC) : -1;
	ok = ok && acc >= 0 && connect(fb, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
	int guard = sockbuf_guard_new(SOCKBUF_GUARD_NO_DIAG);
	for (int fd : {fa, fb, acc})
		ok = ok && sockbuf_guard_add(guard, fd, &floor) == 0;
	int hello[4] = {ok ? fa : -1, fb, acc, floor.snd};
	ssize_t n = write(reply, hello, sizeof(hello));
	char c;
	while (n > 0 && read(cmd, &c, 1) == 1 && c == 'd') {
		int small = 1024, unlock = 0;
		setsockopt(fa, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		setsockopt(fa, SOL_SOCKET, SO_BUF_LOCK, &unlock, sizeof(unlock));
		int now = get_int(fa, SO_SNDBUF);
		n = write(reply, &now, sizeof(now));
	}
	sockbuf::registry::close_own(); // _exit() runs no destructors
	_exit(0);
}

void start_child(floor_child *c)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	if (!(p.features & SOCKBUF_FEAT_BUF_LOCK))
		GTEST_SKIP() << "no SO_BUF_LOCK (Linux 5.15+): cannot unlock a shrunk buffer";
	int to_child[2], from_child[2];
	ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
	ASSERT_EQ(pipe2(from_child, O_CLOEXEC), 0);
	c->pid = fork();
	ASSERT_GE(c->pid, 0);
	if (c->pid == 0) {
		close(to_child[1]);
		close(from_child[0]);
		child_main(to_child[0], from_child[1]);
	}
	close(to_child[0]);
	close(from_child[1]);
	c->cmd = to_child[1];
	c->reply = from_child[0];
	int hello[4];
	ASSERT_EQ(read(c->reply, hello, sizeof(hello)), ssize_t(sizeof(hello)));
	ASSERT_GE(hello[0], 0) << "the child could not set up its guarded connections";
	c->fd_a = hello[0];
	c->fd_b = hello[1];
	c->fd_acc = hello[2];
	c->floor = hello[3];
	ASSERT_GT(c->floor, 0);
}

// Asks the child to drop a's send buffer; its new size.
int drop(floor_child *c)
{
	int now = -1;
	if (write(c->cmd, "d", 1) != 1 || read(c->reply, &now, sizeof(now)) != sizeof(now))
		return -1;
	return now;
}

int exit_status(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int run_status(const std::string &cmd, std::string *out)
{
	FILE *p = popen(cmd.c_str(), "r");
	if (!p)
		return -1;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		out->append(buf, n);
	return exit_status(pclose(p));
}

// A `show --watch` run: its output up to the first sample's count line at
// construction, the rest and the exit status from finish().
struct watch_run {
	FILE *p;
	std::string out;
	explicit watch_run(const std::string &cmd) : p(popen(cmd.c_str(), "r"))
	{
		char line[512];
		while (p && out.find(" below\n") == std::string::npos &&
		       std::fgets(line, sizeof(line), p))
			out += line;
	}
	int finish()
	{
		if (!p)
			return -1;
		char buf[4096];
		size_t n;
		while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
			out.append(buf, n);
		int st = pclose(p);
		p = nullptr;
		return exit_status(st);
	}
	~watch_run()
	{
		if (p)
			pclose(p);
	}
	watch_run(const watch_run &) = delete;
	watch_run &operator=(const watch_run &) = delete;
};

} // namespace

TEST(ShowFloor, FlagsExactlyTheSocketBelowItsFloor)
{
	floor_child c;
	ASSERT_NO_FATAL_FAILURE(start_child(&c));
	if (IsSkipped())
		return;
	const std::string cmd = std::string(SOCKBUF_TOOL " show --json ") + std::to_string(c.pid);
	std::string out;
	EXPECT_EQ(run_status(cmd, &out), 0) << "nothing below yet: " << out;
	auto j = nlohmann::json::parse(out, nullptr, false);
	ASSERT_FALSE(j.is_discarded()) << out;
	EXPECT_EQ(j["summary"]["with_floor"], 3) << out;
	EXPECT_EQ(j["summary"]["below_floor"], 0) << out;

	const int now = drop(&c);
	ASSERT_GT(now, 0);
	ASSERT_LT(now, c.floor) << "SO_SNDBUF 1024 left the buffer at its floor";
	out.clear();
	EXPECT_EQ(run_status(cmd, &out), 3) << out;
	j = nlohmann::json::parse(out, nullptr, false);
	ASSERT_FALSE(j.is_discarded()) << out;
	EXPECT_EQ(j["summary"]["below_floor"], 1) << out;
	int flagged = 0;
	for (const auto &s : j["sockets"]) {
		if (!s.contains("below_floor"))
			continue;
		const int fd = s["fd"].get<int>();
		EXPECT_TRUE(fd == c.fd_a || fd == c.fd_b || fd == c.fd_acc) << fd;
		EXPECT_EQ(s["floor"]["snd"].get<int>(), c.floor);
		EXPECT_EQ(s["floor"]["by"], "guard");
		const int depth = s["below_floor"]["snd"].get<int>();
		if (fd != c.fd_a) {
			EXPECT_EQ(depth, 0) << "fd " << fd;
			continue;
		}
		flagged++;
		EXPECT_EQ(s["sndbuf"].get<int>(), now);
		EXPECT_EQ(depth, c.floor - now);
		EXPECT_EQ(s["below_floor"]["rcv"].get<int>(), 0);
		EXPECT_EQ(s["diagnosis"][0].get<std::string>(),
			  "send buffer " + std::to_string(now) + " bytes is " +
			      std::to_string(c.floor - now) + " bytes below its floor of " +
			      std::to_string(c.floor) + " bytes (set by the guard)");
	}
	EXPECT_EQ(flagged, 1) << out;

	out.clear();
	EXPECT_EQ(run_status(std::string(SOCKBUF_TOOL " show ") + std::to_string(c.pid), &out), 3);
	EXPECT_NE(out.find("BELOW FLOOR: snd by " + std::to_string(c.floor - now)),
		  std::string::npos)
	    << out;
	EXPECT_NE(out.find("3 with a floor, 1 below their floor"), std::string::npos) << out;
}

TEST(ShowFloor, WatchReportsTheDropAndHowLongItLasts)
{
	floor_child c;
	ASSERT_NO_FATAL_FAILURE(start_child(&c));
	if (IsSkipped())
		return;
	watch_run w(std::string(SOCKBUF_TOOL " show ") + std::to_string(c.pid) +
		    " --watch 200 --count 3");
	EXPECT_NE(w.out.find("3 with a floor, 0 below"), std::string::npos) << w.out;
	const int now = drop(&c); // after the first sample, well before the second
	ASSERT_GT(now, 0);
	EXPECT_EQ(w.finish(), 3) << w.out;
	const std::string expect = "DROP fd " + std::to_string(c.fd_a) + " snd " +
				   std::to_string(now) + " under floor " + std::to_string(c.floor) +
				   " by " + std::to_string(c.floor - now);
	EXPECT_NE(w.out.find(expect), std::string::npos) << w.out;
	EXPECT_EQ(w.out.find("DROP fd " + std::to_string(c.fd_b)), std::string::npos) << w.out;
	EXPECT_EQ(w.out.find("DROP fd " + std::to_string(c.fd_acc)), std::string::npos) << w.out;
	EXPECT_NE(w.out.find("snd BELOW by " + std::to_string(c.floor - now) + " (new)"),
		  std::string::npos)
	    << w.out;
	// The third sample changes nothing and prints nothing; the summary
	// says how long the buffer has been below.
	EXPECT_NE(w.out.find("still BELOW: fd " + std::to_string(c.fd_a) + " snd for "),
		  std::string::npos)
	    << "the summary says how long: " << w.out;
	EXPECT_NE(w.out.find("watch ended (count reached): 3 samples"), std::string::npos) << w.out;
}

TEST(ShowFloor, WatchStopsWhenTheProcessExits)
{
	floor_child c;
	ASSERT_NO_FATAL_FAILURE(start_child(&c));
	if (IsSkipped())
		return;
	watch_run w(std::string(SOCKBUF_TOOL " show ") + std::to_string(c.pid) +
		    " --watch 100 --count 100");
	close(c.cmd); // the child leaves
	c.cmd = -1;
	waitpid(c.pid, nullptr, 0);
	c.pid = -1;
	EXPECT_EQ(w.finish(), 0) << w.out;
	EXPECT_NE(w.out.find("exited"), std::string::npos) << w.out;
}

// --trace on: the drop is followed by what the kernel recorded on that
// socket, or by why there is nothing (here the child lowered its own
// buffer with setsockopt, which no traced path reports).  Tracing needs
// root and tracefs: without them the run fails at once, saying why.
TEST(ShowFloor, WatchWithTraceSaysWhatTheKernelRecordedBeforeTheDrop)
{
	floor_child c;
	ASSERT_NO_FATAL_FAILURE(start_child(&c));
	if (IsSkipped())
		return;
	watch_run w(std::string(SOCKBUF_TOOL " show ") + std::to_string(c.pid) +
		    " --watch 200 --count 3 --trace on");
	if (w.out.find("kernel events: not recorded") != std::string::npos) {
		EXPECT_EQ(w.finish(), 1) << w.out;
		GTEST_SKIP() << "no kernel tracing here: " << w.out;
	}
	EXPECT_NE(w.out.find("kernel events: recording sock:"), std::string::npos) << w.out;
	const int now = drop(&c);
	ASSERT_GT(now, 0);
	EXPECT_EQ(w.finish(), 3) << w.out;
	const std::string drop_line = "DROP fd " + std::to_string(c.fd_a) + " snd ";
	const size_t at = w.out.find(drop_line);
	ASSERT_NE(at, std::string::npos) << w.out;
	const size_t next = w.out.find('\n', at);
	ASSERT_NE(next, std::string::npos);
	EXPECT_EQ(w.out.compare(next + 1, 10, "    kernel"), 0)
	    << "the line after the drop names the kernel's events or their absence: " << w.out;
}

// A socket systemd passed (LISTEN_FDS), named by the fd's name or the
// service's socket unit; a worker the master forked holds the same fds.
TEST(ShowSystemd, PassedSocketsFromTheEnvironmentAndCgroup)
{
	using namespace std::string_literals;
	const std::string env = "PATH=/bin\0LISTEN_PID=100\0LISTEN_FDS=2\0"
				"LISTEN_FDNAMES=web.socket:admin.socket\0"s;
	const std::string cg = "0::/system.slice/nginx.service\n";
	systemd_passed p = parse_systemd_passed(100, 1, env, cg);
	EXPECT_EQ(p.service, "nginx.service");
	EXPECT_EQ(p.fd_unit, (std::map<int, std::string>{{3, "web.socket"}, {4, "admin.socket"}}));
	p = parse_systemd_passed(101, 100, env, cg); // a forked worker
	EXPECT_EQ(p.fd_unit.size(), 2u);
	p = parse_systemd_passed(102, 1, env, cg); // LISTEN_PID names another process
	EXPECT_TRUE(p.fd_unit.empty());
	// No names: the service's socket unit, by systemd's default.
	p = parse_systemd_passed(100, 1, "LISTEN_PID=100\0LISTEN_FDS=1\0"s, cg);
	EXPECT_EQ(p.fd_unit, (std::map<int, std::string>{{3, "nginx.socket"}}));
	p = parse_systemd_passed(100, 1, "LISTEN_FDS=1\0"s, cg);
	EXPECT_TRUE(p.fd_unit.empty()) << "no LISTEN_PID: not passed to this process";
	p = parse_systemd_passed(100, 1, "LISTEN_PID=100\0LISTEN_FDS=99999\0"s, cg);
	EXPECT_TRUE(p.fd_unit.empty()) << "a count no systemd passes";
}

TEST(ShowFloor, WatchArguments)
{
	std::string out;
	EXPECT_EQ(run_status(SOCKBUF_TOOL " show 1 --watch 5 2>&1", &out), 2);
	EXPECT_NE(out.find("--watch takes a number from 10 to 60000"), std::string::npos) << out;
	EXPECT_EQ(run_status(SOCKBUF_TOOL " show 1 --count 3 2>&1", &out), 2);
	EXPECT_EQ(run_status(SOCKBUF_TOOL " show --all --watch 100 2>&1", &out), 2);
	EXPECT_EQ(run_status(SOCKBUF_TOOL " show 1 --watch 100 --json 2>&1", &out), 2);
	EXPECT_EQ(run_status(SOCKBUF_TOOL " show 1 --watch 2>&1", &out), 2);
	EXPECT_EQ(run_status(SOCKBUF_TOOL " show 1 --watch 100 --trace maybe 2>&1", &out), 2);
	EXPECT_NE(out.find("--trace takes auto, on or off"), std::string::npos) << out;
	EXPECT_EQ(run_status(SOCKBUF_TOOL " show 1 --trace on 2>&1", &out), 2)
	    << "--trace without --watch";
}

TEST(ShowFloor, FloorsSetThroughTheShimAreShown)
{
#if defined(__SANITIZE_ADDRESS__)
	GTEST_SKIP() << "sanitizer build: the shim cannot be preloaded into python3";
#endif
	if (system("command -v python3 >/dev/null 2>&1") != 0)
		GTEST_SKIP() << "no python3 to run under the shim";
	// A listener sized the classic way (SO_RCVBUF, SO_SNDBUF before
	// listen()): the shim turns both into initial sizes with floors.
	const char *script = "import socket,sys\n"
			     "l=socket.socket()\n"
			     "l.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,65536)\n"
			     "l.setsockopt(socket.SOL_SOCKET,socket.SO_SNDBUF,65536)\n"
			     "l.bind(('127.0.0.1',0)); l.listen(1)\n"
			     "print(l.fileno(),flush=True)\n"
			     "sys.stdin.readline()\n";
	int to_child[2], from_child[2];
	ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
	ASSERT_EQ(pipe2(from_child, O_CLOEXEC), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		execl(SOCKBUF_TOOL, "sockbuf", "run", "--policy", "initial", "--", "python3", "-c",
		      script, static_cast<char *>(nullptr));
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	FILE *in = fdopen(from_child[0], "r");
	int lfd = -1;
	ASSERT_EQ(std::fscanf(in, "%d", &lfd), 1);
	std::string out;
	EXPECT_EQ(run_status(std::string(SOCKBUF_TOOL " show --json ") + std::to_string(pid), &out),
		  0)
	    << out;
	ASSERT_EQ(write(to_child[1], "\n", 1), 1);
	close(to_child[1]);
	int status = 0;
	waitpid(pid, &status, 0);
	std::fclose(in);
	auto j = nlohmann::json::parse(out, nullptr, false);
	ASSERT_FALSE(j.is_discarded()) << out;
	bool found = false;
	for (const auto &s : j["sockets"]) {
		if (s["fd"].get<int>() != lfd)
			continue;
		found = true;
		ASSERT_TRUE(s.contains("floor")) << s.dump();
		EXPECT_EQ(s["floor"]["by"], "shim");
		EXPECT_EQ(s["floor"]["rcv"].get<int>(), 131072) << s.dump();
		EXPECT_EQ(s["floor"]["snd"].get<int>(), 131072) << s.dump();
		EXPECT_EQ(s["below_floor"]["rcv"].get<int>(), 0);
	}
	EXPECT_TRUE(found) << out;
	EXPECT_EQ(j["summary"]["with_floor"], 1) << out;
}
