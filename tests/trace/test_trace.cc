// SPDX-License-Identifier: MIT
// The tracefs recorder: parser over fixtures (5.10, 6.1, 6.12, 6.18), and
// as root a live recorder that sees an event of a loopback connection and
// leaves nothing behind, also when SIGTERM ends its process.
#include "trace.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

using namespace sockbuf::trace;

namespace
{

std::string slurp(const std::string &path)
{
	std::ifstream in(path);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

std::string fixture(const std::string &kernel, const std::string &file)
{
	return slurp(std::string(SOCKBUF_TRACE_FIXTURES) + "/" + kernel + "/" + file);
}

const std::map<std::string, std::string> fixture_names = {
    {"sock_exceed_buf_limit", "sock:sock_exceed_buf_limit"},
    {"inet_sock_set_state", "sock:inet_sock_set_state"},
    {"sockbuf_4242_tcp_enter_memory_pressure", "kprobe:tcp_enter_memory_pressure"}};

class kernels : public ::testing::TestWithParam<const char *>
{
};

TEST_P(kernels, format_files_name_their_fields)
{
	event_format f;
	ASSERT_TRUE(parse_format(fixture(GetParam(), "sock_exceed_buf_limit.format"), &f));
	EXPECT_EQ(f.name, "sock_exceed_buf_limit");
	EXPECT_GT(f.id, 0);
	for (const char *want : {"name", "sysctl_mem", "allocated", "sysctl_wmem", "wmem_alloc",
				 "wmem_queued", "kind"})
		EXPECT_TRUE(f.has(want)) << want;
	EXPECT_FALSE(f.has("common_pid"));
	EXPECT_NE(f.print_fmt.find("wmem_queued=%d"), std::string::npos);
	ASSERT_TRUE(parse_format(fixture(GetParam(), "inet_sock_set_state.format"), &f));
	for (const char *want : {"skaddr", "sport", "dport", "oldstate", "newstate"})
		EXPECT_TRUE(f.has(want)) << want;
}

TEST_P(kernels, trace_lines_become_events)
{
	auto ev = parse_trace(fixture(GetParam(), "trace.txt"), fixture_names);
	ASSERT_EQ(ev.size(), 3u); // header, sched_switch and LOST lines give none
	EXPECT_EQ(ev[0].name, "sock:inet_sock_set_state");
	EXPECT_EQ(ev[0].time_ns, 1200000100000);
	EXPECT_EQ(ev[0].cpu, 1);
	EXPECT_EQ(ev[0].pid, 4242);
	EXPECT_EQ(ev[0].sport, 40000);
	EXPECT_EQ(ev[0].dport, 5001);
	EXPECT_EQ(ev[0].fields.at("newstate"), "TCP_ESTABLISHED");

	EXPECT_EQ(ev[1].name, "sock:sock_exceed_buf_limit");
	EXPECT_EQ(ev[1].pid, 4243); // the task's name has a space and a dash
	EXPECT_EQ(ev[1].time_ns, 1200400200000);
	EXPECT_EQ(ev[1].fields.at("proto"), "TCP");
	EXPECT_EQ(ev[1].fields.at("sysctl_mem"), "1433,1911,2866");
	EXPECT_EQ(ev[1].fields.at("allocated"), "2870");
	EXPECT_EQ(ev[1].fields.at("wmem_queued"), "1048576");
	EXPECT_EQ(ev[1].fields.at("kind"), "SK_MEM_SEND");
	EXPECT_EQ(ev[1].sk, 0u); // this event does not name its socket
	EXPECT_EQ(ev[1].sport, -1);

	EXPECT_EQ(ev[2].name, "kprobe:tcp_enter_memory_pressure");
	EXPECT_EQ(ev[2].sk, 0xffff9a4c81234000u);
	EXPECT_EQ(ev[2].sport, 40000);
	EXPECT_EQ(ev[2].dport, 5001); // skc_dport is network order
}

INSTANTIATE_TEST_SUITE_P(fixtures, kernels, ::testing::Values("5.10", "6.1", "6.12", "6.18"),
			 [](const ::testing::TestParamInfo<const char *> &param) {
				 std::string s = param.param;
				 for (auto &c : s)
					 if (c == '.')
						 c = '_';
				 return "linux_" + s;
			 });

TEST(parse, fields_a_newer_kernel_adds_are_kept_and_can_name_the_socket)
{
	std::map<std::string, std::string> names = {
	    {"sock_exceed_buf_limit", "sock:sock_exceed_buf_limit"}};
	auto e =
	    parse_line("  w-9 (    9) [003] ..... 5.000000001: sock_exceed_buf_limit: "
		       "proto:TCP sysctl_mem=1,2,3 allocated=4 sysctl_rmem=4096 "
		       "rmem_alloc=0 sysctl_wmem=4096 wmem_alloc=1 wmem_queued=9 "
		       "kind=SK_MEM_SEND family=AF_INET sport=7 dport=8 skaddr=ffff888000001000",
		       names);
	ASSERT_TRUE(e);
	EXPECT_EQ(e->pid, 9);
	EXPECT_EQ(e->time_ns, 5000000001);
	EXPECT_EQ(e->fields.at("family"), "AF_INET");
	EXPECT_EQ(e->sport, 7);
	EXPECT_EQ(e->dport, 8);
	EXPECT_EQ(e->sk, 0xffff888000001000u);
	EXPECT_FALSE(parse_line("# tracer: nop", names));
	EXPECT_FALSE(parse_line("CPU:1 [LOST 3 EVENTS]", names));
	EXPECT_FALSE(parse_line("garbage [12] without a stamp", names));
}

// Live: the recorder needs root and tracefs.
std::string live_skip_reason()
{
	if (geteuid() != 0)
		return "not root: tracefs instances need CAP_SYS_ADMIN";
	return "";
}

bool instance_exists(const std::string &path)
{
	return !path.empty() && access(path.c_str(), F_OK) == 0;
}

bool kprobes_left(const std::string &tracefs, const std::string &prefix)
{
	std::string k = slurp(tracefs + "/kprobe_events");
	return k.find(prefix) != std::string::npos;
}

// A loopback connection with some bytes: connect, accept, send, read.
// Returns the client's local port, or -1.
int loopback_transfer()
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (l < 0 || bind(l, reinterpret_cast<sockaddr *>(&a), sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, reinterpret_cast<sockaddr *>(&a), &len) < 0)
		return -1;
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (connect(c, reinterpret_cast<sockaddr *>(&a), sizeof(a)) < 0)
		return -1;
	int s = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
	sockaddr_in me = {};
	len = sizeof(me);
	getsockname(c, reinterpret_cast<sockaddr *>(&me), &len);
	static char buf[65536];
	size_t sent = 0, got = 0;
	const size_t total = 1 << 20;
	while (got < total) { // bounded: 1 MiB, blocking loopback
		if (sent < total) {
			ssize_t n = send(c, buf, std::min(sizeof(buf), total - sent), MSG_DONTWAIT);
			if (n > 0)
				sent += size_t(n);
		}
		ssize_t r = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0)
			got += size_t(r);
		else if (r == 0)
			break;
		else if (errno == EAGAIN) {
			pollfd p = {s, POLLIN, 0};
			if (poll(&p, 1, 5000) <= 0)
				break;
		}
	}
	close(c);
	close(s);
	close(l);
	return got == total ? ntohs(me.sin_port) : -1;
}

recorder_options live_options()
{
	recorder_options o;
	o.mount_private = true;
	o.buffer_kb = 1024;
	return o;
}

TEST(live, records_a_real_event_and_leaves_nothing)
{
	if (auto why = live_skip_reason(); !why.empty())
		GTEST_SKIP() << why;
	recorder r(live_options());
	int err = r.start();
	if (err < 0)
		GTEST_SKIP() << "recorder unavailable: " << r.status().unavailable;
	const std::string inst = r.status().instance, tracefs = r.status().tracefs;
	for (const auto &m : r.status().missing)
		std::printf("not recorded: %s\n", m.c_str());
	ASSERT_TRUE(instance_exists(inst));
	int port = loopback_transfer();
	ASSERT_GT(port, 0);
	std::vector<event> ev;
	ASSERT_EQ(r.drain(&ev), 0);
	bool seen = false;
	for (const auto &e : ev) {
		std::printf("%s t=%lld sport=%d dport=%d\n", e.name.c_str(),
			    static_cast<long long>(e.time_ns), e.sport, e.dport);
		if (e.sport == port)
			seen = true;
	}
	EXPECT_TRUE(seen) << "no event named the client's port " << port << " among " << ev.size();
	r.stop();
	EXPECT_FALSE(instance_exists(inst));
	EXPECT_FALSE(kprobes_left(tracefs, recorder::kprobe_prefix()));
}

TEST(live, sigterm_tears_down)
{
	if (auto why = live_skip_reason(); !why.empty())
		GTEST_SKIP() << why;
	{
		recorder probe(live_options()); // mounts tracefs for this process if needed
		if (probe.start() < 0)
			GTEST_SKIP() << "recorder unavailable: " << probe.status().unavailable;
	}
	std::string tracefs = find_tracefs();
	int p[2];
	ASSERT_EQ(pipe(p), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(p[0]);
		recorder::install_signal_teardown();
		recorder r(live_options());
		std::string msg = r.start() == 0 ? r.status().instance : "-";
		msg += "\n";
		if (write(p[1], msg.data(), msg.size()) < 0)
			_exit(3);
		for (int i = 0; i < 300; i++) // bounded: 30 s, ended by SIGTERM
			poll(nullptr, 0, 100);
		_exit(4);
	}
	close(p[1]);
	char buf[600] = {};
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	ASSERT_GT(n, 1);
	std::string inst(buf, size_t(n) - 1);
	ASSERT_NE(inst, "-");
	EXPECT_TRUE(instance_exists(inst));
	kill(pid, SIGTERM);
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
	EXPECT_FALSE(instance_exists(inst));
	EXPECT_FALSE(kprobes_left(tracefs, "sockbuf_" + std::to_string(pid) + "_"));
}

} // namespace
