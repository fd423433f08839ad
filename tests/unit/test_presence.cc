// SPDX-License-Identifier: MIT
// sockbufd's presence file (impl/internal/daemon_presence.h): which files
// and directories read_serving() refuses, what announce() writes and where,
// and that the directory checked is the directory read from or written to
// even when its path is swapped between the check and the open (the
// openat() hook of the syscall seam opens that window on purpose); and
// sockbufd's progress file (daemon_progress.h), held to the same rules.  The
// file and directory must be root's, so these run as root (as in CI).
#include "daemon_presence.h"
#include "daemon_progress.h"
#include "floor_registry.h"
#include "sys.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace
{

namespace presence = sockbuf::presence;
namespace sys = sockbuf::sys;

#define SKIP_UNLESS_ROOT()                                                                         \
	do {                                                                                       \
		if (geteuid() != 0)                                                                \
			GTEST_SKIP() << "the presence file must be root's: run as root";           \
	} while (0)

// This process as a daemon's presence file would name it.
presence::serving self_serving()
{
	struct stat shm = {};
	stat(sockbuf::registry::default_dir, &shm);
	return {getpid(), sockbuf::registry::process_start_time(getpid()),
		presence::netns_of("/proc/self"), uint64_t(shm.st_dev), uint64_t(shm.st_ino)};
}

// A line naming this process as the daemon, in the daemon's format.
std::string line_of_self()
{
	return presence::line_of(self_serving());
}

// Five decimal numbers (no sign, no leading zero), one space between them
// and one newline after.  A hand check rather than std::regex: GCC 12's
// -Wmaybe-uninitialized fires inside libstdc++'s regex compiler under
// -fsanitize=address, and the build uses -Werror.
bool has_line_shape(const std::string &text)
{
	size_t at = 0;
	for (int field = 0; field < 5; field++) {
		size_t start = at;
		while (at < text.size() && text[at] >= '0' && text[at] <= '9')
			at++;
		if (at == start || (text[start] == '0' && at - start > 1))
			return false;
		char want = field < 4 ? ' ' : '\n';
		if (at >= text.size() || text[at] != want)
			return false;
		at++;
	}
	return at == text.size();
}

// @text is the daemon's line for this process: five decimal numbers
// (no sign, no leading zero), one space between them, one newline after,
// and each the field this process has, as the reader's parser reads it.
void expect_line_of_self(const std::string &text)
{
	EXPECT_TRUE(has_line_shape(text)) << text;
	presence::serving got, want = self_serving();
	ASSERT_EQ(presence::parse_line(text.c_str(), &got), 0) << text;
	EXPECT_EQ(got.pid, want.pid);
	EXPECT_EQ(got.start, want.start);
	EXPECT_EQ(got.netns, want.netns);
	EXPECT_EQ(got.shm_dev, want.shm_dev);
	EXPECT_EQ(got.shm_ino, want.shm_ino);
}

// @text as the file at @path, mode @mode (the umask does not apply).
void put(const std::string &path, const std::string &text, mode_t mode = 0644)
{
	unlink(path.c_str());
	std::ofstream(path) << text;
	ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

std::string slurp(const std::string &path)
{
	std::ifstream in(path);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

bool exists(const std::string &path)
{
	struct stat st;
	return lstat(path.c_str(), &st) == 0;
}

// A temporary tree of the test's own (root's, 0755) and $SOCKBUF_DAEMON_DIR
// pointing into it; both gone at the end.
class Presence : public ::testing::Test
{
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/sockbuf-presence-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		top_ = tmpl;
		ASSERT_EQ(chmod(top_.c_str(), 0755), 0);
	}
	void TearDown() override
	{
		sys::set_openat_hook(nullptr);
		unsetenv("SOCKBUF_DAEMON_DIR");
		std::error_code ec;
		std::filesystem::remove_all(top_, ec); // links removed, not followed
	}
	// A directory @rel under the tree, @mode, made with its parents (0755).
	std::string mkdirs(const std::string &rel, mode_t mode = 0755)
	{
		std::string path = top_;
		std::string rest = rel;
		for (size_t at; !rest.empty();
		     rest = at == std::string::npos ? "" : rest.substr(at + 1)) {
			at = rest.find('/');
			path += "/" + rest.substr(0, at);
			mkdir(path.c_str(), 0755);
		}
		EXPECT_EQ(chmod(path.c_str(), mode), 0) << path;
		return path;
	}
	void use(const std::string &dir) { setenv("SOCKBUF_DAEMON_DIR", dir.c_str(), 1); }
	int read(presence::serving *s = nullptr)
	{
		presence::serving ignored;
		return presence::read_serving(s ? s : &ignored);
	}

	std::string top_;
};

// The file as the daemon writes it, in a directory as systemd makes it.
TEST_F(Presence, ReadsRootsFile)
{
	SKIP_UNLESS_ROOT();
	const std::string d = mkdirs("run");
	use(d);
	put(d + "/serving", line_of_self());
	presence::serving s;
	ASSERT_EQ(read(&s), 0);
	EXPECT_EQ(s.pid, getpid());
	EXPECT_EQ(s.start, sockbuf::registry::process_start_time(getpid()));
	EXPECT_EQ(s.netns, presence::netns_of("/proc/self"));
	EXPECT_TRUE(presence::serves(getpid()));
}

// What the header and the man pages promise read_serving() refuses, each
// with a file that would be read were it not for the one thing wrong.
TEST_F(Presence, RefusesWhatIsNotRootsAlone)
{
	SKIP_UNLESS_ROOT();
	const std::string d = mkdirs("run"), f = d + "/serving", good = line_of_self();
	use(d);
	struct refusal {
		const char *what;
		int err;
		std::function<void()> set;
	};
	const std::vector<refusal> cases = {
	    {"no directory", -ENOENT, [&] { use(top_ + "/none"); }},
	    {"no file", -ENOENT, [&] {}},
	    {"file not root's", -EPERM,
	     [&] {
		     put(f, good);
		     ASSERT_EQ(chown(f.c_str(), 65534, 65534), 0);
	     }},
	    {"file writable by group", -EPERM, [&] { put(f, good, 0664); }},
	    {"file writable by others", -EPERM, [&] { put(f, good, 0646); }},
	    {"file a symbolic link", -EPERM,
	     [&] {
		     put(d + "/real", good);
		     ASSERT_EQ(symlink("real", f.c_str()), 0);
	     }},
	    {"file a FIFO (the open must not block)", -EPERM,
	     [&] { ASSERT_EQ(mkfifo(f.c_str(), 0644), 0); }},
	    {"file not in the format", -EINVAL, [&] { put(f, "sockbufd is here\n"); }},
	    {"directory not root's", -EPERM,
	     [&] {
		     put(f, good);
		     ASSERT_EQ(chown(d.c_str(), 65534, 65534), 0);
	     }},
	    {"directory writable by group", -EPERM,
	     [&] {
		     put(f, good);
		     chmod(d.c_str(), 0775);
	     }},
	    {"directory writable by others", -EPERM,
	     [&] {
		     put(f, good);
		     chmod(d.c_str(), 0757);
	     }},
	    // Root's own good directory and file, through a link.
	    {"directory a symbolic link", -EPERM,
	     [&] {
		     put(f, good);
		     const std::string link = top_ + "/link";
		     ASSERT_EQ(symlink(d.c_str(), link.c_str()), 0);
		     use(link);
	     }},
	    {"directory a symbolic link, named with a trailing slash", -EPERM,
	     [&] {
		     put(f, good);
		     const std::string link = top_ + "/link";
		     ASSERT_EQ(symlink(d.c_str(), link.c_str()), 0);
		     use(link + "/");
	     }},
	    {"directory not a directory", -EPERM,
	     [&] {
		     const std::string plain = top_ + "/plain";
		     put(plain, good);
		     use(plain);
	     }},
	};
	for (const refusal &c : cases) {
		SCOPED_TRACE(c.what);
		// Each case from a clean, good directory.
		std::error_code ec;
		std::filesystem::remove_all(d, ec);
		for (const char *extra : {"/link", "/plain"})
			unlink((top_ + extra).c_str());
		mkdirs("run");
		use(d);
		ASSERT_NO_FATAL_FAILURE(c.set());
		EXPECT_EQ(read(), c.err);
		EXPECT_FALSE(presence::serves(getpid()));
	}
}

// The race of issue 34: between the check of the directory and the open of
// the file in it, the directory (or a parent of it) is swapped for a link
// to a directory another user may write, holding a file that would pass
// every check of the file.  Read by path again, the forged file was taken
// as the daemon's (read_serving() returned 0 and a guard stood down); the
// directory held, the file is looked for where it was checked: none.
struct swap_plan {
	std::string victim, target; // victim becomes a link to target
	std::string on;		    // at the open of the file of this name
	bool done = false;
};
swap_plan g_swap;

int swap_at_open(int, const char *path, int, mode_t)
{
	const char *base = std::strrchr(path, '/');
	base = base ? base + 1 : path;
	if (!g_swap.done && g_swap.on == base) {
		g_swap.done = true;
		const std::string moved = g_swap.victim + ".checked";
		if (rename(g_swap.victim.c_str(), moved.c_str()) != 0 ||
		    symlink(g_swap.target.c_str(), g_swap.victim.c_str()) != 0)
			return -EIO; // the test then fails on the result
	}
	return sys::pass;
}

TEST_F(Presence, DirectorySwappedAfterItsCheck)
{
	SKIP_UNLESS_ROOT();
	struct where {
		const char *what;
		std::string dir;	    // $SOCKBUF_DAEMON_DIR
		std::string victim, target; // swapped: victim -> target
		std::string forged;	    // where the forged file is
	};
	const std::vector<where> cases = {
	    {"the directory", top_ + "/a/run", top_ + "/a/run", top_ + "/evil-a",
	     top_ + "/evil-a/serving"},
	    {"a parent", top_ + "/b/p/run", top_ + "/b/p", top_ + "/evil-b",
	     top_ + "/evil-b/run/serving"},
	};
	for (const where &c : cases) {
		SCOPED_TRACE(c.what);
		mkdirs(c.dir.substr(top_.size() + 1));
		// Another user's directory, and in it a file that passes every
		// check of the file (root's, 0644): only the directory's refuses it.
		const std::string evil = c.forged.substr(0, c.forged.rfind('/'));
		mkdirs(evil.substr(top_.size() + 1), 0777);
		ASSERT_EQ(chown(evil.c_str(), 65534, 65534), 0);
		put(c.forged, line_of_self());
		// Without the swap: refused where it is, none where it is looked for.
		use(evil);
		EXPECT_EQ(read(), -EPERM);
		use(c.dir);
		EXPECT_EQ(read(), -ENOENT);

		g_swap = swap_plan{c.victim, c.target, presence::file_name};
		sys::set_openat_hook(swap_at_open);
		presence::serving s;
		const int err = read(&s);
		sys::set_openat_hook(nullptr);
		ASSERT_TRUE(g_swap.done) << "the file was never opened: the window never opened";
		EXPECT_EQ(err, -ENOENT) << "the forged file was read (pid " << s.pid << ")";
		// Now the path leads to the other user's directory: refused.
		EXPECT_EQ(read(), -EPERM);
	}
}

// announce(): the directory made if missing, the file 0644 whatever the
// umask, renamed into place (no temporary left), in the format
// read_serving() takes; withdraw() removes it only while it is ours.
TEST_F(Presence, AnnounceAndWithdraw)
{
	SKIP_UNLESS_ROOT();
	const std::string d = top_ + "/run", f = d + "/serving";
	use(d);
	const mode_t old = umask(022);
	const int first = presence::announce();
	umask(077);
	const int again = presence::announce();
	umask(old);
	ASSERT_EQ(first, 0);
	struct stat st;
	ASSERT_EQ(stat(d.c_str(), &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT_EQ(st.st_mode & 07777, 0755u);
	ASSERT_EQ(again, 0); // with the umask at 077
	ASSERT_EQ(lstat(f.c_str(), &st), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT_EQ(st.st_mode & 07777, 0644u);
	EXPECT_EQ(st.st_uid, 0u);
	EXPECT_FALSE(exists(f + ".tmp"));
	expect_line_of_self(slurp(f));
	presence::serving s;
	ASSERT_EQ(read(&s), 0);
	EXPECT_EQ(s.pid, getpid());

	// Another daemon's since: left alone.
	const std::string other = "1 1 1 1 1\n";
	put(f, other);
	presence::withdraw();
	EXPECT_EQ(slurp(f), other);
	ASSERT_EQ(presence::announce(), 0);
	presence::withdraw();
	EXPECT_FALSE(exists(f));
}

// It writes only into a directory readers will take: none writable by
// others, none of another user's, none through a link; nothing left in
// any.
TEST_F(Presence, AnnounceRefusesADirectoryReadersWouldRefuse)
{
	SKIP_UNLESS_ROOT();
	const std::string open_dir = mkdirs("open", 0777);
	use(open_dir);
	EXPECT_EQ(presence::announce(), -EPERM);
	EXPECT_FALSE(exists(open_dir + "/serving.tmp"));
	EXPECT_FALSE(exists(open_dir + "/serving"));

	const std::string users = mkdirs("users");
	ASSERT_EQ(chown(users.c_str(), 65534, 65534), 0);
	use(users);
	EXPECT_EQ(presence::announce(), -EPERM);
	EXPECT_FALSE(exists(users + "/serving.tmp"));
	EXPECT_FALSE(exists(users + "/serving"));

	const std::string real = mkdirs("real"), link = top_ + "/link";
	ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
	use(link);
	EXPECT_EQ(presence::announce(), -EPERM);
	EXPECT_FALSE(exists(real + "/serving.tmp"));
	EXPECT_FALSE(exists(real + "/serving"));
}

// The same race for the writer: root's O_TRUNC and fchmod() must not land
// in a directory swapped in for the one checked.  The file is written and
// renamed in the directory checked.
TEST_F(Presence, AnnounceWritesInTheDirectoryChecked)
{
	SKIP_UNLESS_ROOT();
	const std::string d = mkdirs("p/run"), evil = mkdirs("evil/run", 0777);
	ASSERT_EQ(chown(evil.c_str(), 65534, 65534), 0);
	use(d);
	g_swap = swap_plan{top_ + "/p", top_ + "/evil", std::string(presence::file_name) + ".tmp"};
	sys::set_openat_hook(swap_at_open);
	const int err = presence::announce();
	sys::set_openat_hook(nullptr);
	ASSERT_TRUE(g_swap.done) << "the temporary file was never opened";
	EXPECT_EQ(err, 0);
	EXPECT_FALSE(exists(evil + "/serving.tmp"));
	EXPECT_FALSE(exists(evil + "/serving"));
	const std::string checked = top_ + "/p.checked/run/serving";
	expect_line_of_self(slurp(checked));
	EXPECT_FALSE(exists(checked + ".tmp"));
}

// sockbufd's progress file (daemon_progress.h): what the writer makes,
// how a reader takes a line caught mid-rewrite (-EAGAIN: two counts) or
// not in the format (-EINVAL), and that it is refused where the presence
// file would be.
namespace progress = sockbuf::progress;

// The line a reader sees, given as text at offset 0 of a file of its own.
int read_line(const std::string &path, const std::string &text, progress::reading *r)
{
	put(path, text);
	const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	EXPECT_GE(fd, 0) << path;
	const int err = progress::read(fd, r);
	::close(fd);
	return err;
}

TEST_F(Presence, ProgressBeatsAndIsRead)
{
	SKIP_UNLESS_ROOT();
	const std::string dir = mkdirs("run");
	use(dir);
	progress::writer w;
	ASSERT_EQ(w.open({100'000, 0, 60'000'000}), 0);
	const std::string path = dir + "/" + progress::file_name;
	struct stat st = {};
	ASSERT_EQ(stat(path.c_str(), &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0644u);
	EXPECT_FALSE(exists(path + ".tmp"));
	const std::string first = slurp(path);
	ASSERT_EQ(w.beat(), 0);
	const std::string second = slurp(path);
	EXPECT_EQ(first.size(), second.size()) << "a rewrite changed the line's length";
	const int fd = progress::open_file();
	ASSERT_GE(fd, 0) << strerror(-fd);
	progress::reading r;
	ASSERT_EQ(progress::read(fd, &r), 0) << second;
	EXPECT_EQ(r.passes, 2u) << "open() beats once, then one beat";
	EXPECT_EQ(r.b.period_us, 100'000u);
	EXPECT_EQ(r.b.mem_us, 0u);
	EXPECT_EQ(r.b.set_us, 60'000'000u);
	EXPECT_EQ(r.timens, progress::own_timens());
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	const uint64_t now_ns = uint64_t(now.tv_sec) * 1'000'000'000 + uint64_t(now.tv_nsec);
	EXPECT_LE(r.beat_ns, now_ns);
	EXPECT_GT(r.beat_ns, now_ns - 10'000'000'000ull) << "the beat is not this clock's";
	ASSERT_EQ(w.beat(), 0);
	ASSERT_EQ(progress::read(fd, &r), 0);
	EXPECT_EQ(r.passes, 3u) << "the descriptor held reads the line rewritten in place";
	::close(fd);
}

TEST_F(Presence, ProgressLineTornOrForeign)
{
	SKIP_UNLESS_ROOT();
	const std::string path = mkdirs("lines") + "/p";
	const std::string good = "sockbufd-progress 1 00000000000000000007 00000000000000001000 "
				 "0000100000 0000000000 0060000000 00000000000000000000 "
				 "00000000000000000007\n";
	progress::reading r;
	ASSERT_EQ(read_line(path, good, &r), 0);
	EXPECT_EQ(r.passes, 7u);
	EXPECT_EQ(r.beat_ns, 1000u);
	std::string torn = good;
	torn[torn.size() - 2] = '8'; // the last count from the next rewrite
	EXPECT_EQ(read_line(path, torn, &r), -EAGAIN);
	EXPECT_EQ(read_line(path, "", &r), -EAGAIN) << "an empty file: made, not yet written";
	EXPECT_EQ(read_line(path, good + "x", &r), -EAGAIN) << "more than one line";
	std::string v2 = good;
	v2[18] = '2';
	EXPECT_EQ(read_line(path, v2, &r), -EINVAL) << "another version";
	EXPECT_EQ(read_line(path, "7 1000 100000 0 60000000 0 7\n", &r), -EINVAL);
	EXPECT_EQ(read_line(path, good.substr(0, 40), &r), -EINVAL) << "cut short";
}

TEST_F(Presence, ProgressRefusedWhereThePresenceFileIs)
{
	SKIP_UNLESS_ROOT();
	const std::string dir = mkdirs("run");
	use(dir);
	const std::string path = dir + "/" + progress::file_name;
	EXPECT_EQ(progress::open_file(), -ENOENT);
	put(path, "x", 0664);
	EXPECT_EQ(progress::open_file(), -EPERM) << "writable by its group";
	put(path, "x", 0644);
	ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
	EXPECT_EQ(progress::open_file(), -EPERM) << "not root's";
	unlink(path.c_str());
	ASSERT_EQ(symlink("/etc/hostname", path.c_str()), 0);
	EXPECT_EQ(progress::open_file(), -EPERM) << "a symbolic link";
	unlink(path.c_str());
	ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
	put(path, "x", 0644);
	EXPECT_EQ(progress::open_file(), -EPERM) << "in a directory anyone may write";
}

} // namespace
