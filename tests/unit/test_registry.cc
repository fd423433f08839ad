// SPDX-License-Identifier: MIT
// The floor registry (impl/internal/floor_registry.h, the writer, and
// tools/remote/floor_read.h, the reader): what a process publishes is
// read back by pid; readers refuse stale, foreign, truncated and malformed
// files; a forked child keeps to its own file; a reader racing a writer
// never sees a half-written slot.
#include "floor_read.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace reg = sockbuf::registry;

namespace
{

const reg::entry *find(const reg::table &t, uint64_t inode)
{
	for (const auto &e : t.entries)
		if (e.inode == inode)
			return &e;
	return nullptr;
}

// A scratch directory removed with everything in it.
struct scratch {
	std::string dir;
	scratch()
	{
		char tmpl[] = "/tmp/sockbuf-registry-XXXXXX";
		dir = mkdtemp(tmpl) ? tmpl : "";
	}
	~scratch()
	{
		std::string cmd = "rm -rf '" + dir + "'";
		if (!dir.empty() && std::system(cmd.c_str()) != 0)
			std::perror("rm");
	}
};

// A well-formed table file for @pid/@start with one slot, written by hand
// as another program would; @edit may spoil it first.
std::string write_table(const std::string &dir, int pid, uint64_t start,
			size_t keep = reg::file_size, void (*edit)(std::vector<char> *) = nullptr,
			mode_t mode = 0600)
{
	std::vector<char> buf(reg::file_size, 0);
	auto *h = reinterpret_cast<reg::file_header *>(buf.data());
	std::memcpy(h->magic, reg::file_magic, sizeof(reg::file_magic));
	h->version = reg::file_version;
	h->header_size = sizeof(reg::file_header);
	h->slot_size = sizeof(reg::file_slot);
	h->nslots = reg::slot_count;
	h->pid = pid;
	h->start_time = start;
	auto *s = reinterpret_cast<reg::file_slot *>(buf.data() + sizeof(reg::file_header));
	s[7].taken = 1;
	s[7].seq = 2;
	s[7].inode = 4242;
	s[7].who = reg::by_guard;
	s[7].snd = 131072;
	if (edit)
		edit(&buf);
	std::string path = reg::file_path(dir, pid, start);
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
	EXPECT_GE(fd, 0) << path;
	EXPECT_EQ(write(fd, buf.data(), keep), ssize_t(keep));
	fchmod(fd, mode);
	close(fd);
	return path;
}

// A pid that no process has: a child that has been reaped.
int dead_pid()
{
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	waitpid(p, nullptr, 0);
	return int(p);
}

} // namespace

TEST(Registry, PublishedFloorsAreReadBackByPid)
{
	ASSERT_EQ(reg::publish(910001, 100000, 200000, reg::by_guard), 0);
	ASSERT_EQ(reg::publish(910001, 300000, 0, reg::by_shim), 0);
	ASSERT_EQ(reg::publish(910002, 0, 65536, reg::by_guard), 0);
	reg::table t;
	std::string why;
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	const reg::entry *e = find(t, 910001);
	ASSERT_NE(e, nullptr);
	EXPECT_EQ(e->snd, 300000) << "the larger of the two publishers";
	EXPECT_EQ(e->rcv, 200000);
	EXPECT_EQ(e->who, uint32_t(reg::by_guard | reg::by_shim));
	ASSERT_NE(find(t, 910002), nullptr);
	EXPECT_EQ(find(t, 910002)->rcv, 65536);

	// An update replaces, a withdrawal removes only that publisher's floor.
	ASSERT_EQ(reg::publish(910001, 50000, 60000, reg::by_guard), 0);
	reg::withdraw(910001, reg::by_shim);
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	ASSERT_NE(find(t, 910001), nullptr);
	EXPECT_EQ(find(t, 910001)->snd, 50000);
	EXPECT_EQ(find(t, 910001)->who, uint32_t(reg::by_guard));
	reg::withdraw(910001, reg::by_guard);
	ASSERT_EQ(reg::publish(910002, 0, 0, reg::by_guard), 0); // both 0: withdrawn
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	EXPECT_EQ(find(t, 910001), nullptr);
	EXPECT_EQ(find(t, 910002), nullptr);

	// The table is a memfd held by the process, with no name in /dev/shm:
	// sealed against shrinking (no reader's mapping can fault), its
	// space allocated.
	std::string path =
	    reg::file_path(reg::default_dir, getpid(), reg::process_start_time(getpid()));
	EXPECT_NE(access(path.c_str(), F_OK), 0) << path;
	const int fd = reg::own_table_fd();
	ASSERT_GE(fd, 0);
	char link[128] = "";
	const std::string at = "/proc/self/fd/" + std::to_string(fd);
	ASSERT_GT(readlink(at.c_str(), link, sizeof(link) - 1), 0);
	EXPECT_EQ(std::string(link).rfind(reg::memfd_link, 0), 0u) << link;
	const int seals = fcntl(fd, F_GET_SEALS);
	EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	struct stat st;
	ASSERT_EQ(fstat(fd, &st), 0);
	EXPECT_EQ(size_t(st.st_size), reg::file_size);
	EXPECT_GE(size_t(st.st_blocks) * 512, reg::file_size) << "allocated, not sparse";
	EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

// What a guard says it keeps, as `sockbuf show` reads it: "at once" for
// writes (an events guard whose programs watch setsockopt) is not the 0
// that says no guard runs.
TEST(Registry, AGuardsBoundsAreReadBackAndAtOnceIsNotNone)
{
	ASSERT_EQ(reg::publish(910003, 100000, 0, reg::by_guard), 0);
	reg::table t;
	std::string why;
	reg::publish_guard(0, 0, 4321);
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	EXPECT_EQ(t.guard.mem_us, 0u);
	EXPECT_EQ(t.guard.set_us, reg::guard_at_once);
	EXPECT_EQ(t.guard.served_by, 4321);
	reg::publish_guard(20000, 60000000, 0);
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	EXPECT_EQ(t.guard.mem_us, 20000u);
	EXPECT_EQ(t.guard.set_us, 60000000u);
	reg::publish_no_guard();
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	EXPECT_EQ(t.guard.set_us, 0u) << "no guard runs";
	EXPECT_EQ(t.guard.served_by, 0);
	reg::withdraw(910003, reg::by_guard);
}

// A table's name has one spelling: sscanf's "+1", " 1" and "01" are not
// names of pid 1.
TEST(Registry, FileNamesAreStrict)
{
	int pid = 0;
	uint64_t start = 0;
	EXPECT_TRUE(reg::parse_file_name("sockbuf-floors.123.456", &pid, &start));
	EXPECT_EQ(pid, 123);
	EXPECT_EQ(start, 456u);
	for (const char *bad :
	     {"sockbuf-floors.+123.456", "sockbuf-floors. 123.456", "sockbuf-floors.0123.456",
	      "sockbuf-floors.123.+456", "sockbuf-floors.123.0456", "sockbuf-floors.123.456 ",
	      "sockbuf-floors.-1.456", "sockbuf-floors.0.456", "sockbuf-floors.2147483648.1",
	      "sockbuf-floors.123.", "sockbuf-floors..456", "sockbuf-floors.123.456.7",
	      "sockbuf-floors.1.123456789012345678901", "sockbuf-floors.123"})
		EXPECT_FALSE(reg::parse_file_name(bad, &pid, &start)) << bad;
}

TEST(Registry, BadArgumentsAreRefused)
{
	EXPECT_EQ(reg::publish(0, 1, 1, reg::by_guard), -EINVAL);
	EXPECT_EQ(reg::publish(1, -1, 1, reg::by_guard), -EINVAL);
	EXPECT_EQ(reg::publish(1, 1, 1, reg::source(8)), -EINVAL);
	// One publisher per slot: a mix of sources is not one.
	EXPECT_EQ(reg::publish(1, 1, 1, reg::source(reg::by_guard | reg::by_shim)), -EINVAL);
	reg::withdraw(0, reg::by_guard); // harmless
}

TEST(Registry, AWellFormedFileIsRead)
{
	scratch d;
	std::string path = write_table(d.dir, 777, 555);
	reg::table t;
	std::string why;
	ASSERT_EQ(reg::read_file(path, 777, 555, getuid(), &t, &why), 0) << why;
	ASSERT_EQ(t.entries.size(), 1u);
	EXPECT_EQ(t.entries[0].inode, 4242u);
	EXPECT_EQ(t.entries[0].snd, 131072);
}

TEST(Registry, StaleAndForeignFilesAreRefused)
{
	scratch d;
	reg::table t;
	std::string why;
	// Another pid, or the same pid started at another time.
	std::string path = write_table(d.dir, 777, 555);
	EXPECT_EQ(reg::read_file(path, 778, 555, getuid(), &t, &why), -ESTALE);
	EXPECT_EQ(reg::read_file(path, 777, 556, getuid(), &t, &why), -ESTALE);
	EXPECT_NE(why.find("another process"), std::string::npos) << why;
	// Another user's file, or one others can read.
	EXPECT_EQ(reg::read_file(path, 777, 555, getuid() + 1, &t, &why), -EPERM);
	std::string loose = write_table(d.dir, 778, 555, reg::file_size, nullptr, 0644);
	EXPECT_EQ(reg::read_file(loose, 778, 555, getuid(), &t, &why), -EPERM);
	// A symbolic link is not followed.
	std::string link = d.dir + "/link";
	ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
	EXPECT_EQ(reg::read_file(link, 777, 555, getuid(), &t, &why), -ELOOP);
	// No file.
	EXPECT_EQ(reg::read_file(d.dir + "/none", 1, 1, getuid(), &t, &why), -ENOENT);
}

TEST(Registry, TruncatedOrMalformedFilesAreRefused)
{
	scratch d;
	reg::table t;
	std::string why;
	std::string path = write_table(d.dir, 1, 2, reg::file_size / 2);
	EXPECT_EQ(reg::read_file(path, 1, 2, getuid(), &t, &why), -EBADMSG);
	EXPECT_NE(why.find("size"), std::string::npos) << why;
	path =
	    write_table(d.dir, 1, 3, reg::file_size, [](std::vector<char> *b) { (*b)[0] = 'X'; });
	EXPECT_EQ(reg::read_file(path, 1, 3, getuid(), &t, &why), -EBADMSG);
	EXPECT_NE(why.find("magic"), std::string::npos) << why;
	path = write_table(d.dir, 1, 4, reg::file_size, [](std::vector<char> *b) {
		reinterpret_cast<reg::file_header *>(b->data())->version = 99;
	});
	EXPECT_EQ(reg::read_file(path, 1, 4, getuid(), &t, &why), -EPROTO);
	path = write_table(d.dir, 1, 5, reg::file_size, [](std::vector<char> *b) {
		reinterpret_cast<reg::file_header *>(b->data())->nslots = 1u << 30;
	});
	EXPECT_EQ(reg::read_file(path, 1, 5, getuid(), &t, &why), -EPROTO);
	// Slots mid-write, with an unknown publisher or a negative floor are skipped.
	path = write_table(d.dir, 1, 6, reg::file_size, [](std::vector<char> *b) {
		auto *s = reinterpret_cast<reg::file_slot *>(b->data() + sizeof(reg::file_header));
		s[7].seq = 3;
		s[8].taken = 1;
		s[8].inode = 9;
		s[8].who = 8;
		s[8].snd = 1;
		s[9].taken = 1;
		s[9].inode = 10;
		s[9].who = reg::by_shim;
		s[9].snd = -5;
	});
	ASSERT_EQ(reg::read_file(path, 1, 6, getuid(), &t, &why), 0) << why;
	EXPECT_TRUE(t.entries.empty());
}

TEST(Registry, CleanStaleRemovesDeadAndRestartedOnly)
{
	scratch d;
	const int self = getpid();
	const uint64_t start = reg::process_start_time(self);
	ASSERT_NE(start, 0u);
	std::string live = write_table(d.dir, self, start);
	std::string restarted = write_table(d.dir, self, start + 1);
	std::string dead = write_table(d.dir, dead_pid(), 1);
	std::string other = d.dir + "/unrelated.1.2";
	close(open(other.c_str(), O_WRONLY | O_CREAT, 0600));
	EXPECT_EQ(reg::clean_stale(d.dir), 2);
	EXPECT_EQ(access(live.c_str(), F_OK), 0);
	EXPECT_NE(access(restarted.c_str(), F_OK), 0);
	EXPECT_NE(access(dead.c_str(), F_OK), 0);
	EXPECT_EQ(access(other.c_str(), F_OK), 0);
	reg::table t;
	std::string why;
	EXPECT_EQ(reg::read_pid(dead_pid(), &t, &why), -ESRCH);
}

TEST(Registry, AForkedChildWritesItsOwnFile)
{
	ASSERT_EQ(reg::publish(920001, 4096, 4096, reg::by_guard), 0);
	int p[2];
	ASSERT_EQ(pipe(p), 0);
	pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		close(p[0]);
		// The parent's entry is not the child's to change.
		reg::withdraw(920001, reg::by_guard);
		int ok = reg::publish(920002, 8192, 8192, reg::by_shim) == 0;
		reg::table t;
		ok = ok && reg::read_pid(getpid(), &t, nullptr) == 0 && t.entries.size() == 1 &&
		     t.entries[0].inode == 920002;
		char c = ok ? 'y' : 'n';
		ssize_t n = write(p[1], &c, 1);
		// Wait for the parent's look before leaving.
		char go;
		n += read(p[1], &go, 1);
		reg::close_own(); // _exit() runs no destructors
		_exit(n > 0 ? 0 : 1);
	}
	char c = 0;
	ASSERT_EQ(read(p[0], &c, 1), 1);
	EXPECT_EQ(c, 'y') << "the child reads back its own table";
	reg::table t;
	std::string why;
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	EXPECT_NE(find(t, 920001), nullptr) << "the child's withdraw left the parent's table";
	EXPECT_EQ(find(t, 920002), nullptr);
	close(p[0]); // the child's read returns 0: it exits
	int status = 0;
	waitpid(child, &status, 0);
	close(p[1]);
	reg::withdraw(920001, reg::by_guard);
}

TEST(Registry, AReaderNeverSeesAHalfWrittenSlot)
{
	// The writer keeps snd == rcv in every slot it writes; a torn read
	// would show them apart.
	// The table exists before the race starts.
	ASSERT_EQ(reg::publish(930000, 1, 1, reg::by_guard), 0);
	std::atomic<bool> stop{false};
	std::thread writer([&] {
		for (int v = 1; v < 2'000'000 && !stop.load(); v++)
			reg::publish(930000 + uint64_t(v % 16), v, v, reg::by_guard);
	});
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
	int reads = 0, seen = 0, torn = 0, failed = 0;
	std::string why;
	while (reads < 200 && std::chrono::steady_clock::now() < deadline) {
		reg::table t;
		if (reg::read_pid(getpid(), &t, &why) != 0) {
			failed++;
			break;
		}
		for (const auto &e : t.entries)
			if (e.inode >= 930000 && e.inode < 930016) {
				seen++;
				torn += e.snd != e.rcv;
			}
		reads++;
	}
	stop = true;
	writer.join();
	for (uint64_t i = 0; i < 16; i++)
		reg::withdraw(930000 + i, reg::by_guard);
	EXPECT_EQ(failed, 0) << why;
	EXPECT_EQ(torn, 0) << "slots read with snd != rcv";
	EXPECT_GT(reads, 0);
	EXPECT_GT(seen, 0);
}

TEST(Registry, AFullTableCountsWhatItDropped)
{
	std::vector<uint64_t> added;
	int ret = 0;
	for (uint64_t i = 0; i <= reg::slot_count && ret == 0; i++) {
		ret = reg::publish(1'000'000 + i, 1, 1, reg::by_shim);
		if (ret == 0)
			added.push_back(1'000'000 + i);
	}
	EXPECT_EQ(ret, -ENOSPC);
	reg::table t;
	std::string why;
	ASSERT_EQ(reg::read_pid(getpid(), &t, &why), 0) << why;
	EXPECT_GE(t.dropped, 1u);
	for (uint64_t i : added)
		reg::withdraw(i, reg::by_shim);
	EXPECT_EQ(reg::publish(1'000'000, 1, 1, reg::by_shim), 0) << "slots are free again";
	reg::withdraw(1'000'000, reg::by_shim);
}

// A table published for another process (sockbuf run --via seccomp, sockbuf
// fix --guard): read by that process's pid while the publisher maps it,
// refused as stale once no process maps it, gone with the object; a
// forked copy of the publisher takes it over.
TEST(Registry, AForeignTableIsReadForItsProcessWhileItsPublisherMapsIt)
{
	// The process published for: a child that only waits (it maps no table).
	int hold[2];
	ASSERT_EQ(pipe(hold), 0);
	pid_t target = fork();
	ASSERT_GE(target, 0);
	if (target == 0) {
		close(hold[1]);
		char c;
		_exit(read(hold[0], &c, 1) >= 0 ? 0 : 1);
	}
	close(hold[0]);
	std::string path =
	    reg::file_path(reg::default_dir, target, reg::process_start_time(target));
	{
		reg::foreign_table ft;
		ASSERT_EQ(ft.open(target), 0);
		EXPECT_EQ(ft.open(target), -EALREADY);
		EXPECT_EQ(ft.publish(0, 1, 1, reg::by_shim), -EINVAL);
		ASSERT_EQ(ft.publish(930001, 131072, 0, reg::by_shim), 0);
		ASSERT_EQ(ft.publish(930001, 131072, 0, reg::by_guard), 0);
		ASSERT_EQ(ft.publish(930002, 0, 65536, reg::by_shim), 0);
		reg::table t;
		std::string why;
		ASSERT_EQ(reg::read_pid(target, &t, &why), 0) << why;
		EXPECT_EQ(t.publisher, getpid());
		ASSERT_NE(find(t, 930001), nullptr);
		EXPECT_EQ(find(t, 930001)->who, uint32_t(reg::by_guard | reg::by_shim));
		ft.withdraw(930002, reg::by_shim);
		ASSERT_EQ(reg::read_pid(target, &t, &why), 0) << why;
		EXPECT_EQ(find(t, 930002), nullptr);
		reg::table own;
		if (reg::read_pid(getpid(), &own, nullptr) == 0) {
			EXPECT_EQ(find(own, 930001), nullptr)
			    << "the publisher's own table is not written";
		}

		// A forked copy takes it over: the parent releases (file kept,
		// unmapped: stale while nobody maps it), the child maps it again.
		ft.release();
		EXPECT_EQ(reg::read_pid(target, &t, &why), -ESTALE)
		    << "nobody maps it: a dead publisher's table is stale";
		int p[2], go[2]; // the copy's answer; the parent's "done looking"
		ASSERT_EQ(pipe(p), 0);
		ASSERT_EQ(pipe(go), 0);
		pid_t copy = fork();
		ASSERT_GE(copy, 0);
		if (copy == 0) {
			close(p[0]);
			close(go[1]);
			int ok =
			    ft.reopen() == 0 && ft.publish(930003, 8192, 8192, reg::by_guard) == 0;
			char c = ok ? 'y' : 'n';
			ssize_t n = write(p[1], &c, 1);
			n += read(go[0], &c, 1); // 0 at end of file: the parent has looked
			_exit(n > 0 ? 0 : 1);
		}
		close(p[1]);
		close(go[0]);
		char c = 0;
		ASSERT_EQ(read(p[0], &c, 1), 1);
		EXPECT_EQ(c, 'y');
		ASSERT_EQ(reg::read_pid(target, &t, &why), 0) << why;
		EXPECT_EQ(t.publisher, copy);
		EXPECT_NE(find(t, 930001), nullptr);
		EXPECT_NE(find(t, 930003), nullptr);
		close(p[0]);
		close(go[1]);
		waitpid(copy, nullptr, 0);
		ASSERT_EQ(ft.reopen(), 0) << "the file is still there: mapped here again";
		struct stat st;
		ASSERT_EQ(stat(path.c_str(), &st), 0);
		EXPECT_EQ(st.st_mode & 0777, 0600u);
	}
	struct stat st;
	EXPECT_NE(stat(path.c_str(), &st), 0) << "the file goes with the object: " << path;
	close(hold[1]);
	waitpid(target, nullptr, 0);
}
