// SPDX-License-Identifier: MIT
// Whole-file reads (impl/internal/read_file.h): a read(2) interrupted by a
// signal (EINTR, injected through the syscall seam) is retried, a short
// read is continued, and neither is taken for the end of the file.  Also
// through the two readers that once took one read() for the whole file:
// the sysctl reader and the floor registry's start time.
#include "floor_registry.h"
#include "read_file.h"
#include "sys.h"
#include "sysctl.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace sockbuf;

namespace
{

// What the read hook does with each call.
enum class mode { eintr_every_other, eintr_first, always_eintr, eio };

struct hook_state {
	mode m = mode::eintr_every_other;
	int calls = 0;
	int interrupted = 0;
	size_t chunk = 7; // short reads: at most this many bytes a call
};
hook_state g_hook;

ssize_t hook(int fd, void *buf, size_t len)
{
	int call = g_hook.calls++;
	bool fail = false;
	switch (g_hook.m) {
	case mode::eintr_every_other:
		fail = call % 2 == 0;
		break;
	case mode::eintr_first:
		fail = call == 0;
		break;
	case mode::always_eintr:
		fail = true;
		break;
	case mode::eio:
		return -EIO;
	}
	if (fail) {
		g_hook.interrupted++;
		return -EINTR;
	}
	ssize_t n = ::read(fd, buf, std::min(len, g_hook.chunk));
	return n >= 0 ? n : -errno;
}

// Installs the hook for one test and removes it after.
class ReadFile : public ::testing::Test
{
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/sockbuf-read-file-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		dir_ = tmpl;
	}
	void TearDown() override
	{
		sys::set_read_hook(nullptr);
		for (const auto &p : files_)
			unlink(p.c_str());
		rmdir(dir_.c_str());
	}
	void arm(mode m, size_t chunk = 7)
	{
		g_hook = hook_state{};
		g_hook.m = m;
		g_hook.chunk = chunk;
		sys::set_read_hook(hook);
	}
	std::string make(const std::string &name, const std::string &text)
	{
		std::string path = dir_ + "/" + name;
		int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		EXPECT_GE(fd, 0);
		EXPECT_EQ(write(fd, text.data(), text.size()), ssize_t(text.size()));
		close(fd);
		files_.push_back(path);
		return path;
	}

	std::string dir_;
	std::vector<std::string> files_;
};

std::string pattern(size_t n)
{
	std::string s(n, '\0');
	for (size_t i = 0; i < n; i++)
		s[i] = char('a' + i * 7 % 26);
	return s;
}

} // namespace

TEST_F(ReadFile, InterruptedAndShortReadsGiveTheWholeFile)
{
	const std::string text = pattern(10000);
	std::string path = make("big", text);
	arm(mode::eintr_every_other);
	std::string buf(12000, 'x');
	ssize_t n = fileio::read_file(path.c_str(), buf.data(), buf.size());
	ASSERT_EQ(n, ssize_t(text.size()));
	EXPECT_EQ(buf.substr(0, size_t(n)), text);
	// Every other call was interrupted: as many EINTRs as 7-byte reads,
	// plus the one before the read that found the end.
	EXPECT_EQ(g_hook.interrupted, int(text.size() / 7) + 2);

	arm(mode::eintr_every_other);
	std::string out;
	ASSERT_EQ(fileio::read_file(path.c_str(), &out), 0);
	EXPECT_EQ(out, text);
	EXPECT_GT(g_hook.interrupted, 1000);
}

TEST_F(ReadFile, CapStopsTheRead)
{
	const std::string text = pattern(500);
	std::string path = make("capped", text);
	arm(mode::eintr_every_other);
	char buf[100];
	ASSERT_EQ(fileio::read_file(path.c_str(), buf, sizeof(buf)), ssize_t(sizeof(buf)));
	EXPECT_EQ(std::string(buf, sizeof(buf)), text.substr(0, sizeof(buf)));

	arm(mode::eintr_every_other);
	std::string out;
	ASSERT_EQ(fileio::read_file(path.c_str(), &out, 123), 0);
	EXPECT_EQ(out, text.substr(0, 123));
}

// A signal storm cannot make a caller spin: after eintr_retries in a row
// the read gives up with -EINTR.
TEST_F(ReadFile, EndlessEintrIsBounded)
{
	std::string path = make("storm", "12345\n");
	arm(mode::always_eintr);
	char buf[16];
	EXPECT_EQ(fileio::read_file(path.c_str(), buf, sizeof(buf)), -EINTR);
	EXPECT_EQ(g_hook.calls, fileio::eintr_retries);
	arm(mode::always_eintr);
	std::string out;
	EXPECT_EQ(fileio::read_file(path.c_str(), &out), -EINTR);
	EXPECT_EQ(g_hook.calls, fileio::eintr_retries);
}

TEST_F(ReadFile, OtherErrorsAreNotRetried)
{
	std::string path = make("eio", "12345\n");
	arm(mode::eio);
	char buf[16];
	EXPECT_EQ(fileio::read_file(path.c_str(), buf, sizeof(buf)), -EIO);
	EXPECT_EQ(g_hook.calls, 1);
	sys::set_read_hook(nullptr);
	EXPECT_EQ(fileio::read_file((dir_ + "/absent").c_str(), buf, sizeof(buf)), -ENOENT);
	std::string out;
	EXPECT_EQ(fileio::read_file((dir_ + "/absent").c_str(), &out), -ENOENT);
}

// The sysctl reader took a single read() for the whole file: an EINTR on
// it read as "unreadable" (no values).
TEST_F(ReadFile, SysctlReaderRetries)
{
	std::string path = make("tcp_wmem", "4096\t16384\t4194304\n");
	arm(mode::eintr_first, 3);
	int v[3];
	ASSERT_EQ(sysctl::read_ints(path.c_str(), v, 3), 3);
	EXPECT_EQ(v[0], 4096);
	EXPECT_EQ(v[1], 16384);
	EXPECT_EQ(v[2], 4194304);
	EXPECT_EQ(g_hook.interrupted, 1);
}

// So did the registry's start time (/proc/PID/stat field 22), which names
// a process's floor table: an EINTR there lost the table.
TEST_F(ReadFile, RegistryStartTimeRetries)
{
	uint64_t plain = registry::process_start_time(getpid());
	ASSERT_NE(plain, 0u);
	arm(mode::eintr_first, 5);
	EXPECT_EQ(registry::process_start_time(getpid()), plain);
	EXPECT_EQ(g_hook.interrupted, 1);
}
