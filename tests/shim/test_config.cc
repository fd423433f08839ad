// SPDX-License-Identifier: MIT
// The shim's configuration grammar: every accepted form, every malformed
// form, and the load-time decisions (secure execution, file then env).
#include "config.h"
#include "init.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

using namespace sockbuf::shim;

namespace
{

struct parsed {
	bool ok;
	config cfg;
	std::string err;
};

parsed parse_text(const std::string &text)
{
	parsed p{};
	char err[256];
	p.ok = parse(text.data(), text.size(), &p.cfg, err, sizeof(err));
	p.err = err;
	return p;
}

} // namespace

TEST(ShimConfig, EmptyGivesDefaults)
{
	auto p = parse_text("");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.global, policy::initial);
	EXPECT_EQ(p.cfg.nports, 0);
	EXPECT_FALSE(p.cfg.allow_force);
	EXPECT_FALSE(p.cfg.exec_drop);
	EXPECT_EQ(p.cfg.log, log_target::none);
	EXPECT_FALSE(needs_socket_events(p.cfg));
	EXPECT_TRUE(p.cfg.guard_events) << "the guard uses events where they load";
	EXPECT_FALSE(p.cfg.guard_bpf);
}

// The guard's sources: events (default on) and the BPF pass (default off).
TEST(ShimConfig, GuardSources)
{
	auto p = parse_text("guard:10,guard_events:off,guard_bpf:on");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.guard_ms, 10);
	EXPECT_FALSE(p.cfg.guard_events);
	EXPECT_TRUE(p.cfg.guard_bpf);
	p = parse_text("guard_events:off,guard_bpf:on,guard_events:on,guard_bpf:off");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_TRUE(p.cfg.guard_events) << "later items win";
	EXPECT_FALSE(p.cfg.guard_bpf);
	EXPECT_FALSE(needs_socket_events(p.cfg)) << "no socket hooks for the guard's sources";
}

// A bad value names the item and says what the key takes.
TEST(ShimConfig, GuardSourcesBadValueNamed)
{
	auto p = parse_text("guard:10,guard_events:yes");
	EXPECT_FALSE(p.ok);
	EXPECT_NE(p.err.find("item 2 'guard_events:yes'"), std::string::npos) << p.err;
	EXPECT_NE(p.err.find("guard_events must be on or off"), std::string::npos) << p.err;
	p = parse_text("guard_bpf:1");
	EXPECT_FALSE(p.ok);
	EXPECT_NE(p.err.find("item 1 'guard_bpf:1'"), std::string::npos) << p.err;
	EXPECT_NE(p.err.find("guard_bpf must be on or off"), std::string::npos) << p.err;
}

// The hand-over to sockbufd: allowed by default, declined with off (the
// guard gets SOCKBUF_GUARD_NO_DAEMON); a bad value named.
TEST(ShimConfig, GuardDaemon)
{
	auto p = parse_text("guard:10");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_TRUE(p.cfg.guard_daemon) << "the guard may stand down by default";
	p = parse_text("guard:10,guard_daemon:off");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_FALSE(p.cfg.guard_daemon);
	p = parse_text("guard_daemon:off,guard_daemon:on");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_TRUE(p.cfg.guard_daemon) << "later items win";
	p = parse_text("guard:10,guard_daemon:no");
	EXPECT_FALSE(p.ok);
	EXPECT_NE(p.err.find("item 2 'guard_daemon:no'"), std::string::npos) << p.err;
	EXPECT_NE(p.err.find("guard_daemon must be on or off"), std::string::npos) << p.err;
}

TEST(ShimConfig, TheIssueExample)
{
	auto p = parse_text("policy:initial,default_rcv:256K,listener.rcv:1M,port=2049:lock");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.global, policy::initial);
	EXPECT_EQ(p.cfg.size[role_any][dir_rcv], 256 * 1024);
	EXPECT_EQ(p.cfg.size[role_listener][dir_rcv], 1024 * 1024);
	ASSERT_EQ(p.cfg.nports, 1);
	EXPECT_EQ(p.cfg.ports[0].port, 2049);
	EXPECT_EQ(p.cfg.ports[0].pol, policy::lock);
	EXPECT_TRUE(needs_socket_events(p.cfg));
}

TEST(ShimConfig, EveryKey)
{
	auto p = parse_text("policy:lock,default_snd:4096,default_rcv:1023m,listener:initial,"
			    "connecting:passthrough,accepted:lock,listener.snd:8k,"
			    "connecting.rcv:2M,accepted.snd:123,force:allow,exec:drop,"
			    "log:fd=7,log_rate:3,guard:25");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.global, policy::lock);
	EXPECT_EQ(p.cfg.size[role_any][dir_snd], 4096);
	EXPECT_EQ(p.cfg.size[role_any][dir_rcv], 1023 << 20);
	EXPECT_EQ(p.cfg.by_role[role_listener], policy::initial);
	EXPECT_EQ(p.cfg.by_role[role_connecting], policy::passthrough);
	EXPECT_EQ(p.cfg.by_role[role_accepted], policy::lock);
	EXPECT_EQ(p.cfg.size[role_listener][dir_snd], 8192);
	EXPECT_EQ(p.cfg.size[role_connecting][dir_rcv], 2 << 20);
	EXPECT_EQ(p.cfg.size[role_accepted][dir_snd], 123);
	EXPECT_TRUE(p.cfg.allow_force);
	EXPECT_TRUE(p.cfg.exec_drop);
	EXPECT_EQ(p.cfg.log, log_target::to_fd);
	EXPECT_EQ(p.cfg.log_fd, 7);
	EXPECT_EQ(p.cfg.log_rate, 3);
	EXPECT_EQ(p.cfg.guard_ms, 25);
	EXPECT_EQ(parse_text("guard:10,guard:off").cfg.guard_ms, 0);
}

TEST(ShimConfig, Reserve)
{
	auto p = parse_text("reserve:on");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_TRUE(p.cfg.reserve);
	// Accepted sockets must be seen to be reserved one by one.
	EXPECT_TRUE(needs_socket_events(p.cfg));
	EXPECT_FALSE(parse_text("reserve:on,reserve:off").cfg.reserve);
	EXPECT_FALSE(parse_text("policy:initial").cfg.reserve);
	EXPECT_FALSE(parse_text("reserve:yes").ok);
	EXPECT_FALSE(parse_text("reserve:").ok);
}

TEST(ShimConfig, LogTargets)
{
	auto p = parse_text("log:/tmp/shim.log");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.log, log_target::to_file);
	EXPECT_STREQ(p.cfg.log_path, "/tmp/shim.log");
	p = parse_text("log:stderr,log:off");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.log, log_target::none);
	p = parse_text("log:/var/log/a:b"); // only the first ':' splits
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_STREQ(p.cfg.log_path, "/var/log/a:b");
}

TEST(ShimConfig, LaterItemsWinAndFilesAddUp)
{
	auto p = parse_text("policy:lock,policy:passthrough,port=80:lock,port=80:initial");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.global, policy::passthrough);
	ASSERT_EQ(p.cfg.nports, 1);
	EXPECT_EQ(p.cfg.ports[0].pol, policy::initial);

	// A second parse on top of the first: the environment after the file.
	char err[256];
	const char env[] = "default_rcv:64K";
	ASSERT_TRUE(parse(env, sizeof(env) - 1, &p.cfg, err, sizeof(err)));
	EXPECT_EQ(p.cfg.global, policy::passthrough);
	EXPECT_EQ(p.cfg.size[role_any][dir_rcv], 65536);
}

TEST(ShimConfig, FileSyntaxCommentsNewlinesSpaces)
{
	auto p = parse_text("# sockbuf shim\n  policy : lock  # for comparison\n\n"
			    "port=2049:initial, default_rcv:1M\r\n#, policy:passthrough\n");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(p.cfg.global, policy::lock);
	EXPECT_EQ(p.cfg.size[role_any][dir_rcv], 1 << 20);
	ASSERT_EQ(p.cfg.nports, 1);
	EXPECT_EQ(p.cfg.ports[0].pol, policy::initial);
}

TEST(ShimConfig, SizeLimits)
{
	EXPECT_TRUE(parse_text("default_rcv:1").ok);
	EXPECT_TRUE(parse_text("default_rcv:1073741823").ok); // SOCKBUF_SIZE_MAX
	EXPECT_TRUE(parse_text("default_rcv:1023M").ok);
	EXPECT_FALSE(parse_text("default_rcv:1073741824").ok);
	EXPECT_FALSE(parse_text("default_rcv:1G1").ok);
	EXPECT_FALSE(parse_text("default_rcv:2G").ok);
	EXPECT_FALSE(parse_text("default_rcv:0").ok);
	EXPECT_FALSE(parse_text("default_rcv:99999999999999999999").ok);
}

TEST(ShimConfig, PortRuleLimits)
{
	std::string many;
	for (int i = 1; i <= max_port_rules; i++)
		many += "port=" + std::to_string(i) + ":lock,";
	EXPECT_TRUE(parse_text(many).ok);
	auto p = parse_text(many + "port=999:lock");
	EXPECT_FALSE(p.ok);
	EXPECT_NE(p.err.find("too many port rules"), std::string::npos) << p.err;
	EXPECT_TRUE(parse_text("port=65535:lock").ok);
}

// Every malformed form the grammar can meet: each is rejected with a
// reason that names the item.
class ShimConfigMalformed : public ::testing::TestWithParam<const char *>
{
};

TEST_P(ShimConfigMalformed, RejectedWithReason)
{
	auto p = parse_text(GetParam());
	EXPECT_FALSE(p.ok) << GetParam();
	EXPECT_NE(p.err.find("item "), std::string::npos) << p.err;
	EXPECT_EQ(p.err.find('\n'), std::string::npos) << "one line: " << p.err;
}

INSTANTIATE_TEST_SUITE_P(
    All, ShimConfigMalformed,
    ::testing::Values("policy", "policy:", ":initial", "policy:bogus", "policy:Initial",
		      "policy:initial,bogus:1", "default_rcv:", "default_rcv:K", "default_rcv:-1",
		      "default_rcv:+5", "default_rcv:1.5M", "default_rcv:1T", "default_rcv:0x10",
		      "default_rcv:12 34", "default_rcv:256KB", "default_snd:1e6", "listener.:1M",
		      "listener.rcv:", "listener.xyz:1M", "listener.rcv.snd:1M", "server:lock",
		      "listener:bogus", "accepted.rcv:1M1", "port=:lock", "port=0:lock",
		      "port=65536:lock", "port=-1:lock", "port=80x:lock", "port=80:", "port=80:1M",
		      "port=80.rcv:1M", "force:yes", "force:", "exec:keep", "log:file",
		      "log:fd=", "log:fd=x", "log:fd=-1", "log:relative/path", "log_rate:0",
		      "log_rate:-3", "log_rate:fast", "log_rate:10000001", "guard:0", "guard:60001",
		      "guard:5ms", "guard:-1", "guard:", "guard_events:yes", "guard_events:ON",
		      "guard_events:", "guard_events:on off", "guard_bpf:1", "guard_bpf:true",
		      "guard_bpf:", "guard_bpf.snd:on", "policy:initial\n:x", "policy\x01:initial",
		      "\xff\xfe:lock"));

TEST(ShimConfig, LongLogPathRejected)
{
	std::string path = "log:/" + std::string(300, 'a');
	auto p = parse_text(path);
	EXPECT_FALSE(p.ok);
	EXPECT_NE(p.err.find("too long"), std::string::npos) << p.err;
	EXPECT_NE(p.err.find("..."), std::string::npos) << "the item is cut short: " << p.err;
}

TEST(ShimConfig, EmbeddedNulRejected)
{
	const char text[] = "log:/tmp/a\0b";
	config cfg;
	char err[256];
	EXPECT_FALSE(parse(text, sizeof(text) - 1, &cfg, err, sizeof(err)));
	const char policy_nul[] = "policy:initial\0";
	EXPECT_FALSE(parse(policy_nul, sizeof(policy_nul) - 1, &cfg, err, sizeof(err)));
}

TEST(ShimConfig, TinyErrorBufferStillTerminated)
{
	config cfg;
	char err[8];
	std::memset(err, 'x', sizeof(err));
	EXPECT_FALSE(parse("policy:bogus", 12, &cfg, err, sizeof(err)));
	EXPECT_EQ(std::strlen(err), sizeof(err) - 1);
	EXPECT_FALSE(parse("policy:bogus", 12, &cfg, nullptr, 0));
}

TEST(ShimConfig, Resolve)
{
	auto p = parse_text("policy:initial,listener:lock,port=2049:passthrough,port=80:initial");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(resolve(p.cfg, role_any, 0), policy::initial);
	EXPECT_EQ(resolve(p.cfg, role_listener, 0), policy::lock);
	EXPECT_EQ(resolve(p.cfg, role_listener, 80), policy::initial); // port beats role
	EXPECT_EQ(resolve(p.cfg, role_connecting, 2049), policy::passthrough);
	EXPECT_EQ(resolve(p.cfg, role_accepted, 443), policy::initial); // no rule: global
}

TEST(ShimConfig, DefaultSize)
{
	auto p = parse_text("default_rcv:64K,listener.rcv:1M,connecting.snd:32K");
	ASSERT_TRUE(p.ok) << p.err;
	EXPECT_EQ(default_size(p.cfg, role_listener, dir_rcv), 1 << 20);
	EXPECT_EQ(default_size(p.cfg, role_connecting, dir_rcv), 65536);
	EXPECT_EQ(default_size(p.cfg, role_connecting, dir_snd), 32768);
	EXPECT_EQ(default_size(p.cfg, role_listener, dir_snd), 0);
}

// Load-time decisions.

TEST(ShimInit, UnsetMeansInitialAndActive)
{
	load_result r;
	decide(load_input{}, &r);
	EXPECT_TRUE(r.active);
	EXPECT_EQ(r.cfg.global, policy::initial);
	EXPECT_STREQ(r.warning, "");
}

TEST(ShimInit, SecureExecutionIsInactiveAndSilent)
{
	load_input in;
	in.env = "policy:initial,default_rcv:1M";
	in.at_secure = 1;
	load_result r;
	decide(in, &r);
	EXPECT_FALSE(r.active);
	EXPECT_STREQ(r.warning, "");
	in.env = "policy:bogus"; // not even parsed, so no warning either
	decide(in, &r);
	EXPECT_FALSE(r.active);
	EXPECT_STREQ(r.warning, "");
}

TEST(ShimInit, MalformedEnvWarnsOnceAndPassesThrough)
{
	load_input in;
	in.env = "policy:initial,port=99999:lock";
	load_result r;
	decide(in, &r);
	EXPECT_FALSE(r.active);
	std::string w = r.warning;
	EXPECT_NE(w.find("SOCKBUF_SHIM"), std::string::npos) << w;
	EXPECT_NE(w.find("port=99999"), std::string::npos) << w;
	EXPECT_NE(w.find("inactive"), std::string::npos) << w;
	EXPECT_EQ(w.find('\n'), w.size() - 1) << "exactly one line: " << w;
}

TEST(ShimInit, FileThenEnv)
{
	const char file[] = "policy:lock\ndefault_rcv:64K\n";
	load_input in;
	in.file = file;
	in.file_len = sizeof(file) - 1;
	in.file_name = "/etc/sockbuf/shim.conf";
	in.env = "policy:initial";
	load_result r;
	decide(in, &r);
	EXPECT_TRUE(r.active);
	EXPECT_EQ(r.cfg.global, policy::initial);
	EXPECT_EQ(r.cfg.size[role_any][dir_rcv], 65536);
}

TEST(ShimInit, MalformedFileNamedInWarning)
{
	const char file[] = "policy:lock\nbogus\n";
	load_input in;
	in.file = file;
	in.file_len = sizeof(file) - 1;
	in.file_name = "/etc/sockbuf/shim.conf";
	load_result r;
	decide(in, &r);
	EXPECT_FALSE(r.active);
	EXPECT_NE(std::string(r.warning).find("/etc/sockbuf/shim.conf: item 2"), std::string::npos)
	    << r.warning;
}

TEST(ShimInit, UnreadableNamedFile)
{
	load_input in;
	in.file_name = "/nonexistent/shim.conf";
	in.file_error = "No such file or directory";
	load_result r;
	decide(in, &r);
	EXPECT_FALSE(r.active);
	EXPECT_NE(std::string(r.warning).find("/nonexistent/shim.conf"), std::string::npos);
}

TEST(ShimInit, AllPassthroughIsInactive)
{
	load_input in;
	in.env = "policy:passthrough";
	load_result r;
	decide(in, &r);
	EXPECT_FALSE(r.active);
	EXPECT_STREQ(r.warning, "");
	in.env = "policy:passthrough,port=2049:initial";
	decide(in, &r);
	EXPECT_TRUE(r.active);
}

TEST(ShimInit, DropFromPreload)
{
	char a[] = "/usr/lib/libsockbuf-shim.so";
	EXPECT_TRUE(drop_from_preload(a, "libsockbuf-shim.so"));
	EXPECT_STREQ(a, "");
	char b[] = "/x/liba.so:/build/lib/libsockbuf-shim.so /y/libb.so";
	EXPECT_TRUE(drop_from_preload(b, "libsockbuf-shim.so"));
	EXPECT_STREQ(b, "/x/liba.so:/y/libb.so");
	char c[] = "libfoo-libsockbuf-shim.so:/x/libsockbuf-shim.so.1";
	EXPECT_FALSE(drop_from_preload(c, "libsockbuf-shim.so"));
	EXPECT_STREQ(c, "libfoo-libsockbuf-shim.so:/x/libsockbuf-shim.so.1");
	char d[] = "::libsockbuf-shim.so::/a.so:";
	EXPECT_TRUE(drop_from_preload(d, "libsockbuf-shim.so"));
	EXPECT_STREQ(d, "/a.so");
}
