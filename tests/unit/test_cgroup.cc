// SPDX-License-Identifier: MIT
// Why SO_RESERVE_MEM is usable or not: the cgroup readers over fixture
// text, and the probe's reason against the kernel's own answer.
#include "cgroup.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

using namespace sockbuf;
using namespace sockbuf::test;

namespace
{

constexpr const char *v2_mountinfo =
    "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

constexpr const char *hybrid_mountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n";

cgroup::facts facts_of(const char *proc_cgroup, const char *mountinfo, const char *cmdline,
		       int v2_memory)
{
	cgroup::facts f;
	cgroup::parse_proc_cgroup(proc_cgroup, &f.member);
	cgroup::parse_mountinfo(mountinfo, &f.mnt);
	f.nosocket = cgroup::cmdline_nosocket(cmdline);
	f.v2_memory = v2_memory;
	return f;
}

TEST(Cgroup, V2RootIsNeverCharged)
{
	auto f = facts_of("0::/\n", v2_mountinfo, "root=/dev/vda1 ro", 1);
	EXPECT_TRUE(f.member.v2);
	EXPECT_STREQ(f.member.v2_path, "/");
	EXPECT_FALSE(f.member.v1_memory);
	EXPECT_STREQ(f.mnt.v2, "/sys/fs/cgroup");
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, f), SOCKBUF_RESERVE_ROOT_CGROUP);
}

TEST(Cgroup, V2ChildWithMemoryIsUsableAndItsDirIsFound)
{
	auto f = facts_of("0::/system.slice/app.service\n", v2_mountinfo, "quiet", 1);
	EXPECT_STREQ(f.member.v2_path, "/system.slice/app.service");
	EXPECT_EQ(cgroup::explain(0, f), SOCKBUF_RESERVE_USABLE);
	// The kernel said no without a reason the files show.
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, f), SOCKBUF_RESERVE_UNKNOWN);
	char dir[cgroup::max_path];
	ASSERT_TRUE(cgroup::memory_cgroup_dir(f, dir, sizeof(dir)));
	EXPECT_STREQ(dir, "/sys/fs/cgroup/system.slice/app.service");
}

TEST(Cgroup, V2ChildWithoutTheMemoryController)
{
	auto f = facts_of("0::/user.slice/session-1.scope\n", v2_mountinfo, "", 0);
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, f), SOCKBUF_RESERVE_NO_MEMORY_CONTROLLER);
	EXPECT_TRUE(cgroup::controllers_have_memory("cpuset cpu io memory pids\n"));
	EXPECT_FALSE(cgroup::controllers_have_memory("cpuset cpu io pids\n"));
	EXPECT_FALSE(cgroup::controllers_have_memory("memory_recursiveprot"));
	EXPECT_FALSE(cgroup::controllers_have_memory(""));
}

TEST(Cgroup, V1MemoryLineMeansTcpAccountingDecides)
{
	auto f = facts_of("9:name=systemd:/\n4:memory:/process_api/9f66\n1:cpu,cpuacct:/\n0::/\n",
			  hybrid_mountinfo, "console=ttyS0", -1);
	EXPECT_TRUE(f.member.v1_memory);
	EXPECT_STREQ(f.member.v1_path, "/process_api/9f66");
	EXPECT_STREQ(f.mnt.v1_memory, "/sys/fs/cgroup/memory");
	EXPECT_STREQ(f.mnt.v2, "/sys/fs/cgroup/unified");
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, f), SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING);
	char dir[cgroup::max_path];
	ASSERT_TRUE(cgroup::memory_cgroup_dir(f, dir, sizeof(dir)));
	EXPECT_STREQ(dir, "/sys/fs/cgroup/memory/process_api/9f66");

	auto root = facts_of("4:memory:/\n0::/\n", hybrid_mountinfo, "", -1);
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, root), SOCKBUF_RESERVE_ROOT_CGROUP);
}

TEST(Cgroup, V1MountShowingAPartOfTheTree)
{
	// Inside a container the memory mount's root is the container's cgroup.
	auto f = facts_of(
	    "5:memory:/docker/abc\n",
	    "40 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n", "", -1);
	char dir[cgroup::max_path];
	ASSERT_TRUE(cgroup::memory_cgroup_dir(f, dir, sizeof(dir)));
	EXPECT_STREQ(dir, "/sys/fs/cgroup/memory");
}

TEST(Cgroup, NosocketOnTheCommandLine)
{
	EXPECT_TRUE(cgroup::cmdline_nosocket("ro cgroup.memory=nosocket quiet"));
	EXPECT_TRUE(cgroup::cmdline_nosocket("cgroup.memory=nokmem,nosocket\n"));
	EXPECT_FALSE(cgroup::cmdline_nosocket("cgroup.memory=nokmem"));
	EXPECT_FALSE(cgroup::cmdline_nosocket("init=/bin/sh -- cgroup.memory=nosocket"));
	auto f = facts_of("0::/app.slice\n", v2_mountinfo, "cgroup.memory=nosocket", 1);
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, f), SOCKBUF_RESERVE_NOSOCKET);
}

TEST(Cgroup, NoMemoryControllerAnywhere)
{
	// A kernel without the memory controller: no v1 memory line, and the
	// v2 cgroup lists no memory.
	auto f = facts_of("1:cpu:/\n0::/job\n", v2_mountinfo, "", 0);
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, f), SOCKBUF_RESERVE_NO_MEMORY_CONTROLLER);
}

TEST(Cgroup, KernelAnswersOtherThanEopnotsupp)
{
	cgroup::facts none;
	EXPECT_EQ(cgroup::explain(-ENOPROTOOPT, none), SOCKBUF_RESERVE_NO_OPTION);
	EXPECT_EQ(cgroup::explain(-ENOMEM, none), SOCKBUF_RESERVE_UNKNOWN);
	EXPECT_EQ(cgroup::explain(-EOPNOTSUPP, none), SOCKBUF_RESERVE_UNKNOWN);
}

TEST(Cgroup, MalformedTextIsIgnored)
{
	cgroup::membership m;
	cgroup::parse_proc_cgroup("garbage\n::\n4:memory:relative\n0::\n", &m);
	EXPECT_FALSE(m.v1_memory);
	EXPECT_FALSE(m.v2);
	std::string long_path = "0::/" + std::string(cgroup::max_path, 'a') + "\n";
	cgroup::parse_proc_cgroup(long_path, &m);
	EXPECT_FALSE(m.v2); // does not fit: unknown, not cut short
	cgroup::mounts mt;
	cgroup::parse_mountinfo("1 2 3\nno dash here\n- cgroup2\n", &mt);
	EXPECT_STREQ(mt.v2, "");
}

// The probe's reason agrees with what SO_RESERVE_MEM does on this machine
// and with the cgroup files as read now.
TEST(Cgroup, ProbeReasonAgreesWithTheKernel)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, SOCKBUF_PROBE_FRESH), 0);
	fd s(tcp());
	int bytes = 4096;
	int ret =
	    ::setsockopt(s, SOL_SOCKET, SO_RESERVE_MEM, &bytes, sizeof(bytes)) == 0 ? 0 : -errno;
	EXPECT_EQ(ret == 0, p.reserve_state == SOCKBUF_RESERVE_USABLE);
	EXPECT_EQ(ret == -ENOPROTOOPT, p.reserve_state == SOCKBUF_RESERVE_NO_OPTION);
	EXPECT_EQ(ret == 0, (p.features & SOCKBUF_FEAT_RESERVE_MEM) != 0);
	cgroup::facts f;
	cgroup::read_system(&f);
	EXPECT_EQ(p.reserve_state, cgroup::explain(ret, f));
	// Whatever the reason, it is one the files support.
	if (p.reserve_state == SOCKBUF_RESERVE_ROOT_CGROUP) {
		EXPECT_STREQ(f.member.v1_memory ? f.member.v1_path : f.member.v2_path, "/");
	}
	if (p.reserve_state == SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING) {
		EXPECT_TRUE(f.member.v1_memory);
	}
	if (ret == -EOPNOTSUPP) {
		EXPECT_NE(p.reserve_state, SOCKBUF_RESERVE_USABLE);
	}
	EXPECT_STRNE(sockbuf_reserve_state_name(p.reserve_state), "?");
}

TEST(Cgroup, StateNames)
{
	EXPECT_STREQ(sockbuf_reserve_state_name(SOCKBUF_RESERVE_USABLE), "usable");
	EXPECT_STREQ(sockbuf_reserve_state_name(SOCKBUF_RESERVE_ROOT_CGROUP), "root-cgroup");
	EXPECT_STREQ(sockbuf_reserve_state_name(SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING),
		     "v1-no-tcp-accounting");
	EXPECT_STREQ(sockbuf_reserve_state_name(-1), "?");
	EXPECT_STREQ(sockbuf_reserve_state_name(99), "?");
}

} // namespace
