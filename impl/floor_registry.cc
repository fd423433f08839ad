// SPDX-License-Identifier: MIT
// The floor registry's writer: this process's floors, published for `sockbuf show`.
#include "floor_registry.h"

#include "read_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sockbuf::registry
{

namespace
{

// ---- Async-signal-safe helpers (no malloc, no stdio) ----

// Appends the decimal @v at @p; returns the new end.
char *put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = char('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

char *put_str(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

// Fills @buf (at least 128 bytes) with the file's path.
void make_path(char *buf, const char *dir, int pid, uint64_t start)
{
	char *p = put_str(buf, dir);
	*p++ = '/';
	p = put_str(p, file_prefix);
	p = put_u64(p, uint64_t(pid));
	*p++ = '.';
	p = put_u64(p, start);
	*p = '\0';
}

// Field 22 of /proc/<pid>/stat ("self" when @pid is 0), 0 on failure.
uint64_t start_time_of(int pid)
{
	char path[64];
	char *p = put_str(path, "/proc/");
	if (pid > 0)
		p = put_u64(p, uint64_t(pid));
	else
		p = put_str(p, "self");
	put_str(p, "/stat")[0] = '\0';
	char buf[1024];
	ssize_t n = fileio::read_file(path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	// The command name may hold spaces and ')': fields start after the last ')'.
	char *q = nullptr;
	for (char *c = buf; *c; c++)
		if (*c == ')')
			q = c;
	if (!q)
		return 0;
	q++;
	// Field 3 (state) is the first after ')': skip 19 to reach field 22.
	for (int i = 0; i < 19; i++) {
		while (*q == ' ')
			q++;
		while (*q && *q != ' ')
			q++;
		if (!*q)
			return 0;
	}
	while (*q == ' ')
		q++;
	uint64_t v = 0;
	bool any = false;
	for (; *q >= '0' && *q <= '9'; q++, any = true)
		v = v * 10 + uint64_t(*q - '0');
	return any ? v : 0;
}

// ---- Writer state ----

// 0 unknown, 1 on, -1 off.
std::atomic<int> g_enabled{0};
// 0 idle, else the pid of the process whose thread is opening the file (a
// child forked meanwhile sees its parent's pid there and takes over).
std::atomic<pid_t> g_opening{0};
// The process that owns g_base; another pid (a forked child) must not use it.
std::atomic<pid_t> g_owner{0};
std::atomic<file_header *> g_base{nullptr};
char g_path[160];
// A private page that a fork() child sees zeroed (MADV_WIPEONFORK, Linux
// 4.14): a 1 there says g_base is this process's, without a getpid()
// system call per write.  nullptr where the kernel lacks it: getpid().
std::atomic<std::atomic<int> *> g_mine{nullptr};

bool enabled()
{
	int e = g_enabled.load(std::memory_order_relaxed);
	if (e == 0) {
		const char *v = getenv("SOCKBUF_FLOOR_REGISTRY");
		e = (v && v[0] == '0' && v[1] == '\0') ? -1 : 1;
		g_enabled.store(e, std::memory_order_relaxed);
	}
	return e > 0;
}

file_slot *slots(file_header *h)
{
	return reinterpret_cast<file_slot *>(reinterpret_cast<char *>(h) + sizeof(file_header));
}

uint32_t home(uint64_t inode)
{
	return uint32_t((inode * 0x9E3779B97F4A7C15ull) >> 32) % slot_count;
}

// Makes the table file at @path for process @pid (started at @start),
// written by @publisher (0: @pid itself) and maps it; 0 or -errno.
int make_file(const char *path, pid_t pid, uint64_t start, pid_t publisher, file_header **out)
{
	const int oflags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = open(path, oflags, 0600);
	if (fd < 0 && errno == EEXIST) {
		// Same pid and start time: this process before an exec() (or a
		// publisher before it).  Take it over only if it is a plain
		// file of ours.
		struct stat st;
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			return -EEXIST;
		unlink(path);
		fd = open(path, oflags, 0600);
	}
	if (fd < 0)
		return -errno;
	void *m = MAP_FAILED;
	if (ftruncate(fd, off_t(file_size)) == 0)
		m = mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err) {
		unlink(path);
		return err;
	}
	madvise(m, file_size, MADV_DONTFORK);
	auto *h = static_cast<file_header *>(m);
	h->version = file_version;
	h->header_size = sizeof(file_header);
	h->slot_size = sizeof(file_slot);
	h->nslots = slot_count;
	h->pid = int32_t(pid);
	h->publisher = int32_t(publisher);
	h->start_time = start;
	// The magic last: a reader never takes a half-made header for a table.
	std::atomic_thread_fence(std::memory_order_release);
	std::memcpy(h->magic, file_magic, sizeof(file_magic));
	*out = h;
	return 0;
}

// Creates this process's file; 0 or -errno.  Called by one thread at a time.
int create(pid_t self)
{
	uint64_t start = start_time_of(0);
	if (start == 0)
		return -ENOENT;
	make_path(g_path, default_dir, int(self), start);
	file_header *h = nullptr;
	if (int err = make_file(g_path, self, start, 0, &h); err < 0)
		return err;
	void *page =
	    mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page != MAP_FAILED && madvise(page, 4096, MADV_WIPEONFORK) != 0) {
		munmap(page, 4096);
		page = MAP_FAILED;
	}
	auto *mine = page == MAP_FAILED ? nullptr : new (page) std::atomic<int>(1);
	g_base.store(h, std::memory_order_release);
	g_owner.store(self, std::memory_order_release);
	g_mine.store(mine, std::memory_order_release);
	return 0;
}

// This process's table, made on first use when @make; nullptr if none.
file_header *own_table(bool make, int *err)
{
	file_header *h = g_base.load(std::memory_order_acquire);
	std::atomic<int> *mine = g_mine.load(std::memory_order_acquire);
	if (h && mine && mine->load(std::memory_order_relaxed) == 1)
		return h; // the fast path: no system call
	const pid_t self = getpid();
	if (h && !mine && g_owner.load(std::memory_order_acquire) == self)
		return h;
	if (!make)
		return nullptr;
	// Bounded: a signal handler that interrupted the opener must not spin.
	for (int i = 0; i < 1000; i++) {
		pid_t idle = 0;
		bool won = g_opening.compare_exchange_strong(idle, self, std::memory_order_acquire);
		if (!won && idle != self)
			won = g_opening.compare_exchange_strong(idle, self,
								std::memory_order_acquire);
		if (won) {
			h = g_base.load(std::memory_order_acquire);
			if (!h || g_owner.load(std::memory_order_acquire) != self) {
				// A forked child: the parent's mapping was not
				// inherited (MADV_DONTFORK): forget it.  The
				// wiped page stays mapped (a page, once).
				g_base.store(nullptr, std::memory_order_release);
				g_mine.store(nullptr, std::memory_order_release);
				*err = create(self);
			}
			g_opening.store(0, std::memory_order_release);
			return g_base.load(std::memory_order_acquire);
		}
		sched_yield();
	}
	*err = -EAGAIN;
	return nullptr;
}

file_slot *find(file_header *h, uint64_t inode, source who)
{
	file_slot *s = slots(h);
	const uint32_t limit = std::min(h->max_probe.load(std::memory_order_acquire), slot_count);
	for (uint32_t i = 0, at = home(inode); i <= limit; i++, at = (at + 1) % slot_count)
		if (s[at].taken.load(std::memory_order_acquire) &&
		    s[at].inode.load(std::memory_order_relaxed) == inode &&
		    s[at].who.load(std::memory_order_relaxed) == uint32_t(who))
			return &s[at];
	return nullptr;
}

void write_slot(file_slot *s, uint64_t inode, int snd, int rcv, source who)
{
	uint32_t seq = s->seq.load(std::memory_order_relaxed);
	s->seq.store(seq + 1, std::memory_order_relaxed);
	std::atomic_thread_fence(std::memory_order_release);
	s->inode.store(inode, std::memory_order_relaxed);
	s->who.store(uint32_t(who), std::memory_order_relaxed);
	s->snd.store(snd, std::memory_order_relaxed);
	s->rcv.store(rcv, std::memory_order_relaxed);
	s->seq.store(seq + 2, std::memory_order_release);
}

// Removes the own file at exit (and at dlclose of the library).
__attribute__((destructor)) void remove_at_exit()
{
	close_own();
}

// Records the floors of @inode in table @h; 0 or -ENOSPC.
int put(file_header *h, uint64_t inode, int snd, int rcv, source who)
{
	if (file_slot *s = find(h, inode, who)) {
		write_slot(s, inode, snd, rcv, who);
		h->changes.fetch_add(1, std::memory_order_release);
		return 0;
	}
	file_slot *s = slots(h);
	for (uint32_t i = 0, at = home(inode); i < slot_count; i++, at = (at + 1) % slot_count) {
		uint32_t free_ = 0;
		if (!s[at].taken.compare_exchange_strong(free_, 1, std::memory_order_acquire))
			continue;
		write_slot(&s[at], inode, snd, rcv, who);
		h->changes.fetch_add(1, std::memory_order_release);
		uint32_t seen = h->max_probe.load(std::memory_order_relaxed);
		while (seen < i &&
		       !h->max_probe.compare_exchange_weak(seen, i, std::memory_order_release))
			;
		return 0;
	}
	h->dropped.fetch_add(1, std::memory_order_relaxed);
	return -ENOSPC;
}

void take_out(file_header *h, uint64_t inode, source who)
{
	if (file_slot *s = find(h, inode, who)) {
		write_slot(s, 0, 0, 0, who);
		s->taken.store(0, std::memory_order_release);
		h->changes.fetch_add(1, std::memory_order_release);
	}
}

bool bad_args(uint64_t inode, int snd, int rcv, source who)
{
	return inode == 0 || snd < 0 || rcv < 0 ||
	       (who != by_guard && who != by_shim && who != by_listener);
}

} // namespace

int publish(uint64_t inode, int snd, int rcv, source who)
{
	if (bad_args(inode, snd, rcv, who))
		return -EINVAL;
	if (snd == 0 && rcv == 0) {
		withdraw(inode, who);
		return 0;
	}
	if (!enabled())
		return -ECANCELED;
	int err = 0;
	file_header *h = own_table(true, &err);
	if (!h)
		return err;
	return put(h, inode, snd, rcv, who);
}

void withdraw(uint64_t inode, source who)
{
	int err = 0;
	file_header *h = own_table(false, &err);
	if (!h || inode == 0)
		return;
	take_out(h, inode, who);
}

void publish_guard(uint32_t mem_us, uint32_t set_us, int served_by)
{
	int err = 0;
	file_header *h = own_table(false, &err);
	if (!h)
		return; // no floor published yet: nothing to show it with
	h->guard_mem_us.store(mem_us, std::memory_order_relaxed);
	h->guard_set_us.store(set_us, std::memory_order_relaxed);
	h->guard_served_by.store(served_by, std::memory_order_relaxed);
}

int foreign_table::open(int pid)
{
	if (h_)
		return -EALREADY;
	if (!enabled())
		return -ECANCELED;
	const uint64_t start = start_time_of(pid);
	if (pid <= 0 || start == 0)
		return -ESRCH;
	char path[160];
	make_path(path, default_dir, pid, start);
	path_ = path;
	return make_file(path_.c_str(), pid, start, getpid(), &h_);
}

int foreign_table::publish(uint64_t inode, int snd, int rcv, source who)
{
	if (bad_args(inode, snd, rcv, who))
		return -EINVAL;
	if (!h_)
		return -EBADF;
	if (snd == 0 && rcv == 0) {
		take_out(h_, inode, who);
		return 0;
	}
	return put(h_, inode, snd, rcv, who);
}

void foreign_table::withdraw(uint64_t inode, source who)
{
	if (h_ && inode)
		take_out(h_, inode, who);
}

void foreign_table::release()
{
	if (h_ && h_ != MAP_FAILED)
		munmap(h_, file_size);
	h_ = nullptr;
}

int foreign_table::reopen()
{
	// The parent's mapping is not in this process (MADV_DONTFORK):
	// only the path is.
	h_ = nullptr;
	if (path_.empty())
		return -EBADF;
	int fd = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	void *m = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    size_t(st.st_size) == file_size)
		m = mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = m == MAP_FAILED ? -EBADF : 0;
	close(fd);
	if (err)
		return err;
	madvise(m, file_size, MADV_DONTFORK);
	h_ = static_cast<file_header *>(m);
	h_->publisher = int32_t(getpid());
	return 0;
}

foreign_table::~foreign_table()
{
	if (!h_)
		return;
	unlink(path_.c_str());
	munmap(h_, file_size);
}

void close_own()
{
	int err = 0;
	file_header *h = own_table(false, &err);
	// No new file after this, and the mapping stays: another thread may
	// still be writing into it while the process exits.
	g_enabled.store(-1, std::memory_order_relaxed);
	if (h)
		unlink(g_path);
}

uint64_t process_start_time(int pid)
{
	return pid > 0 ? start_time_of(pid) : 0;
}

} // namespace sockbuf::registry
