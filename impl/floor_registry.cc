// SPDX-License-Identifier: MIT
// The floor registry's writer: this process's floors, published for `sockbuf show`.
#include "floor_registry.h"

#include "fd_pass.h"
#include "read_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
// The own table's memfd (held: `sockbuf show` and the daemon find it here).
std::atomic<int> g_fd{-1};
std::atomic<uint64_t> g_ino{0}; // its inode
// The daemon's run directory, read once (secure_getenv) at the first table.
char g_dir[96];
// The presence file's inode when the table was last offered to a daemon:
// another one (a daemon started since) has it offered again.
std::atomic<uint64_t> g_offered_to{0};
std::atomic<uint64_t> g_offer_check_ns{0};
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

// Fills the header of a table just mapped at @m.
file_header *init_header(void *m, pid_t pid, uint64_t start, pid_t publisher)
{
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
	return h;
}

// The whole of @fd's table allocated, then mapped: a file system (or a
// memory cgroup) without room says so here, never with a SIGBUS at a
// later write through the mapping.  The mapping, or nullptr and -errno
// in @err.
void *allocate_and_map(int fd, int *err)
{
	if (fallocate(fd, 0, 0, off_t(file_size)) != 0) {
		*err = errno == EOPNOTSUPP ? -ENOSPC : -errno;
		return nullptr;
	}
	void *m = mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		*err = -errno;
		return nullptr;
	}
	return m;
}

// Makes the table file at @path for process @pid (started at @start),
// written by @publisher (0: @pid itself) and maps it; its descriptor in
// @fd_out.  0 or -errno.
int make_file(const char *path, pid_t pid, uint64_t start, pid_t publisher, file_header **out,
	      int *fd_out)
{
	const int oflags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = open(path, oflags, 0600);
	if (fd < 0 && errno == EEXIST) {
		// Same pid and start time: a publisher before it.  Take it
		// over only if it is a plain file of ours.
		struct stat st;
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			return -EEXIST;
		unlink(path);
		fd = open(path, oflags, 0600);
	}
	if (fd < 0)
		return -errno;
	int err = 0;
	void *m = allocate_and_map(fd, &err);
	if (!m) {
		close(fd);
		unlink(path);
		return err;
	}
	*out = init_header(m, pid, start, publisher);
	*fd_out = fd;
	return 0;
}

// Whether @dir is a directory that root alone may write (the daemon's).
bool root_dir(const char *dir)
{
	struct stat st;
	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

// The presence file's inode in @dir, or 0.
uint64_t presence_inode(const char *dir)
{
	char path[160];
	put_str(put_str(put_str(path, dir), "/serving"), "")[0] = '\0';
	struct stat st;
	return lstat(path, &st) == 0 ? uint64_t(st.st_ino) : 0;
}

// Offers the table whose descriptor here is @fd (a read-only one of it
// goes) to the daemon in @dir; see register_own().
int offer(const char *dir, int fd, register_kind kind, pid_t target, int wait_ms)
{
	if (!root_dir(dir))
		return errno == ENOENT ? -ENOENT : -EPERM;
	struct sockaddr_un a = {};
	a.sun_family = AF_UNIX;
	const size_t dlen = std::strlen(dir);
	if (dlen + 1 + std::strlen(register_socket) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	put_str(put_str(put_str(a.sun_path, dir), "/"), register_socket)[0] = '\0';
	// A read-only description of the same table: the daemon reads, never
	// writes.
	char self[64];
	put_str(put_u64(put_str(self, "/proc/self/fd/"), uint64_t(fd)), "")[0] = '\0';
	const int ro = open(self, O_RDONLY | O_CLOEXEC);
	if (ro < 0)
		return -errno;
	const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		const int err = -errno;
		close(ro);
		return err;
	}
	int err = 0;
	if (connect(s, reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) != 0)
		err = -errno;
	if (!err) {
		registration_message m = {};
		std::memcpy(m.magic, register_magic, sizeof(m.magic));
		m.kind = kind;
		m.fd = fd;
		m.target = int32_t(target);
		err = fd_pass::send_fd(s, &m, sizeof(m), ro);
	}
	close(ro);
	if (!err && wait_ms > 0) {
		struct pollfd p = {s, POLLIN, 0};
		int32_t answer = 0;
		const int n = poll(&p, 1, wait_ms);
		if (n == 0)
			err = -ETIMEDOUT;
		else if (n < 0)
			err = -errno;
		else if (recv(s, &answer, sizeof(answer), MSG_DONTWAIT) != ssize_t(sizeof(answer)))
			err = -ECONNRESET;
		else
			err = answer > 0 || answer < -4095 ? -EPROTO : answer;
	}
	close(s);
	return err;
}

// Creates this process's table; 0 or -errno.  Called by one thread at a time.
int create(pid_t self)
{
	uint64_t start = start_time_of(0);
	if (start == 0)
		return -ENOENT;
	if (!g_dir[0]) {
		const char *env = secure_getenv("SOCKBUF_DAEMON_DIR");
		const char *d = env && *env ? env : "/run/sockbufd";
		if (std::strlen(d) < sizeof(g_dir))
			put_str(g_dir, d)[0] = '\0';
	}
	// A forked child holds its parent's table's descriptor: not its own
	// (closed only if the number still names that table: the program may
	// have closed it and reused the number).
	if (const int old = g_fd.exchange(-1); old >= 0) {
		struct stat st;
		if (fstat(old, &st) == 0 && uint64_t(st.st_ino) == g_ino.load())
			close(old);
	}
	const int fd = memfd_create(memfd_name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	int err = 0;
	void *m = allocate_and_map(fd, &err);
	// Never shrunk or grown under a reader's mapping.
	if (m && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
		err = -errno;
	if (!m || err) {
		if (m)
			munmap(m, file_size);
		close(fd);
		return err ? err : -ENOMEM;
	}
	file_header *h = init_header(m, self, start, 0);
	void *page =
	    mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page != MAP_FAILED && madvise(page, 4096, MADV_WIPEONFORK) != 0) {
		munmap(page, 4096);
		page = MAP_FAILED;
	}
	auto *mine = page == MAP_FAILED ? nullptr : new (page) std::atomic<int>(1);
	struct stat st;
	g_ino.store(fstat(fd, &st) == 0 ? uint64_t(st.st_ino) : 0);
	g_fd.store(fd, std::memory_order_release);
	g_base.store(h, std::memory_order_release);
	g_owner.store(self, std::memory_order_release);
	g_mine.store(mine, std::memory_order_release);
	if (g_dir[0]) {
		g_offered_to.store(presence_inode(g_dir), std::memory_order_relaxed);
		(void)offer(g_dir, fd, kind_own, 0, 0);
	}
	return 0;
}

// At most once a second: a daemon started since the table was offered
// (its presence file is another) is offered it.  Async-signal-safe.
void offer_again()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	const uint64_t now = uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
	uint64_t due = g_offer_check_ns.load(std::memory_order_relaxed);
	if (now < due || !g_offer_check_ns.compare_exchange_strong(due, now + 1'000'000'000,
								   std::memory_order_relaxed))
		return;
	const uint64_t ino = g_dir[0] ? presence_inode(g_dir) : 0;
	if (!ino || ino == g_offered_to.load(std::memory_order_relaxed))
		return;
	const int fd = g_fd.load(std::memory_order_acquire);
	if (fd >= 0 && offer(g_dir, fd, kind_own, 0, 0) == 0)
		g_offered_to.store(ino, std::memory_order_relaxed);
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
	const int ret = put(h, inode, snd, rcv, who);
	offer_again();
	return ret;
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
	h->guard_set_us.store(set_us ? set_us : guard_at_once, std::memory_order_relaxed);
	h->guard_served_by.store(served_by, std::memory_order_relaxed);
}

void publish_no_guard()
{
	int err = 0;
	file_header *h = own_table(false, &err);
	if (!h)
		return;
	h->guard_mem_us.store(0, std::memory_order_relaxed);
	h->guard_set_us.store(0, std::memory_order_relaxed);
	h->guard_served_by.store(0, std::memory_order_relaxed);
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
	if (int err = make_file(path_.c_str(), pid, start, getpid(), &h_, &fd_); err < 0)
		return err;
	offer_foreign();
	return 0;
}

void foreign_table::offer_foreign()
{
	const char *env = secure_getenv("SOCKBUF_DAEMON_DIR");
	(void)offer(env && *env ? env : "/run/sockbufd", fd_, kind_foreign, h_->pid, 0);
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
	if (fd_ >= 0)
		close(fd_);
	fd_ = -1;
}

int foreign_table::reopen()
{
	// The parent's mapping is not in this process (MADV_DONTFORK):
	// only the path and the descriptor are; the parent's descriptor is
	// not this publisher's.
	h_ = nullptr;
	if (fd_ >= 0)
		close(fd_);
	fd_ = -1;
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
	if (m == MAP_FAILED) {
		close(fd);
		return -EBADF;
	}
	madvise(m, file_size, MADV_DONTFORK);
	h_ = static_cast<file_header *>(m);
	h_->publisher = int32_t(getpid());
	fd_ = fd;
	offer_foreign();
	return 0;
}

foreign_table::~foreign_table()
{
	if (fd_ >= 0)
		close(fd_);
	if (!h_)
		return;
	unlink(path_.c_str());
	munmap(h_, file_size);
}

void close_own()
{
	// No new table after this, and the mapping stays: another thread may
	// still be writing into it while the process exits.  The table has
	// no name: it goes with the process.
	g_enabled.store(-1, std::memory_order_relaxed);
}

int own_table_fd()
{
	int err = 0;
	return own_table(false, &err) ? g_fd.load(std::memory_order_acquire) : -1;
}

int register_own(const char *dir, int wait_ms)
{
	const int fd = own_table_fd();
	if (fd < 0)
		return -ENODATA;
	const int ret = offer(dir, fd, kind_own, 0, wait_ms);
	if (ret == 0 && std::strcmp(dir, g_dir) == 0)
		g_offered_to.store(presence_inode(dir), std::memory_order_relaxed);
	return ret;
}

uint64_t process_start_time(int pid)
{
	return pid > 0 ? start_time_of(pid) : 0;
}

} // namespace sockbuf::registry
