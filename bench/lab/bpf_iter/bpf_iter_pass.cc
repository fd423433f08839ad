// SPDX-License-Identifier: MIT
// Lab program: what one floor-guard pass over N established TCP sockets
// costs when the kernel is crossed once per pass (a BPF task_file iterator)
// instead of once per socket (the library's default pass: batched
// getsockopt over io_uring).  Root (CAP_BPF and CAP_PERFMON); kernel 6.1 or
// later (an iterator limited to one process); run it in a network
// namespace of its own (README.md).
//
// Side by side in one run, per round and in turn: the library's pass
// (sockbuf_guard_pass) with its default sources and with
// SOCKBUF_GUARD_BPF, and two bare iterators of guard_iter.bpf.c: one
// walking the process's files and nothing else (walk_only), one reading
// what a pass needs (read_sizes).  CPU time of the calling thread per pass; the median over
// rounds of each round's median, and the spread of those round medians.
// Before timing, the iterator must report a socket put under its floor and
// a guarded fd number that now names another socket, or the run fails.
#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace
{

struct floor_entry {
	uint64_t ino;
	int32_t snd, rcv;
};

struct below_record {
	uint32_t fd, what;
	int32_t snd, rcv;
};

constexpr int floor_bytes = 4096; // under every connected socket's size

int64_t thread_cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string loadavg()
{
	std::ifstream f("/proc/loadavg");
	std::string a, b, c;
	f >> a >> b >> c;
	return a + " " + b + " " + c;
}

[[noreturn]] void die(const std::string &what)
{
	fmt::print(stderr, "bpf_iter_pass: {}\n", what);
	exit(1);
}

// @pairs loopback connections: both ends stay open.
std::vector<int> connect_pairs(int pairs)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (l < 0 || bind(l, reinterpret_cast<sockaddr *>(&a), sizeof(a)) < 0 ||
	    listen(l, 4096) < 0 || getsockname(l, reinterpret_cast<sockaddr *>(&a), &len) < 0)
		die(fmt::format("listener: {}", strerror(errno)));
	std::vector<int> fds;
	for (int i = 0; i < pairs; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c < 0 || connect(c, reinterpret_cast<sockaddr *>(&a), sizeof(a)) < 0)
			die(fmt::format("connect {}: {}", i, strerror(errno)));
		int s = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
		if (s < 0)
			die(fmt::format("accept {}: {}", i, strerror(errno)));
		fds.push_back(c);
		fds.push_back(s);
	}
	close(l);
	return fds;
}

uint64_t inode_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? uint64_t(st.st_ino) : 0;
}

class iterator
{
public:
	iterator(const std::string &object, const char *program)
	{
		obj_ = bpf_object__open_file(object.c_str(), nullptr);
		if (!obj_)
			die(fmt::format("open {}: {}", object, strerror(errno)));
		if (bpf_object__load(obj_) != 0)
			die(fmt::format("load {}: {}", object, strerror(errno)));
		map_ = bpf_object__find_map_fd_by_name(obj_, "floors");
		bpf_program *p = bpf_object__find_program_by_name(obj_, program);
		union bpf_iter_link_info info;
		memset(&info, 0, sizeof(info));
		info.task.tid = uint32_t(getpid()); // this process's files only
		LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info,
			    .link_info_len = sizeof(info));
		link_ = p ? bpf_program__attach_iter(p, &opts) : nullptr;
		if (map_ < 0 || !link_)
			die(fmt::format("attach {}: {} (kernel 6.1 or later?)", program,
					strerror(errno)));
	}
	~iterator()
	{
		bpf_link__destroy(link_);
		bpf_object__close(obj_);
	}
	iterator(const iterator &) = delete;
	iterator &operator=(const iterator &) = delete;

	void guard(int fd, uint64_t ino, int snd, int rcv)
	{
		uint32_t key = uint32_t(fd);
		floor_entry v = {ino, snd, rcv};
		if (bpf_map_update_elem(map_, &key, &v, BPF_ANY) != 0)
			die(fmt::format("floors[{}]: {}", fd, strerror(errno)));
	}

	// One pass: the records it wrote.
	std::vector<below_record> pass()
	{
		std::vector<below_record> out;
		int it = bpf_iter_create(bpf_link__fd(link_));
		if (it < 0)
			die(fmt::format("bpf_iter_create: {}", strerror(errno)));
		below_record buf[512];
		ssize_t n;
		while ((n = read(it, buf, sizeof(buf))) > 0)
			out.insert(out.end(), buf, buf + size_t(n) / sizeof(below_record));
		if (n < 0)
			die(fmt::format("read: {}", strerror(errno)));
		close(it);
		return out;
	}

private:
	bpf_object *obj_ = nullptr;
	bpf_link *link_ = nullptr;
	int map_ = -1;
};

// The iterator must see what a guard pass has to see.
void check_reports(iterator *it, const std::vector<int> &fds)
{
	int under = fds[0], moved = fds[1];
	it->guard(under, inode_of(under), 1 << 30, floor_bytes);
	it->guard(moved, inode_of(fds[2]), floor_bytes, floor_bytes);
	auto recs = it->pass();
	bool saw_under = false, saw_moved = false;
	for (const auto &r : recs) {
		saw_under |= int(r.fd) == under && r.what == 1;
		saw_moved |= int(r.fd) == moved && r.what == 2;
	}
	if (recs.size() != 2 || !saw_under || !saw_moved)
		die(fmt::format("self-check: {} records, under-floor seen {}, moved fd seen {}",
				recs.size(), saw_under, saw_moved));
	it->guard(under, inode_of(under), floor_bytes, floor_bytes);
	it->guard(moved, inode_of(moved), floor_bytes, floor_bytes);
	if (!it->pass().empty())
		die("self-check: records with every socket above its floor");
}

struct series {
	std::string name;
	std::function<void()> pass;
	std::vector<double> round_medians_us;
};

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void run(const std::string &object, int sockets, int rounds, int passes)
{
	std::vector<int> fds = connect_pairs(sockets / 2);
	iterator walk(object, "walk_only"), read(object, "read_sizes");
	check_reports(&read, fds);
	for (int fd : fds)
		read.guard(fd, inode_of(fd), floor_bytes, floor_bytes);
	int g = sockbuf_guard_new(0);
	if (g < 0)
		die(fmt::format("sockbuf_guard_new: {}", strerror(-g)));
	sockbuf_floor fl = {floor_bytes, floor_bytes};
	for (int fd : fds)
		if (int err = sockbuf_guard_add(g, fd, &fl); err < 0)
			die(fmt::format("sockbuf_guard_add: {}", strerror(-err)));
	int gb = sockbuf_guard_new(SOCKBUF_GUARD_BPF);
	for (int fd : fds)
		if (gb < 0 || sockbuf_guard_add(gb, fd, &fl) < 0)
			die("sockbuf_guard_add (SOCKBUF_GUARD_BPF)");
	sockbuf_guard_report rep, rep_bpf;
	std::vector<series> all = {
	    {"library pass (sockbuf_guard_pass)",
	     [&] {
		     if (sockbuf_guard_pass(g, &rep) < 0 || rep.below)
			     die("sockbuf_guard_pass");
	     },
	     {}},
	    {"library pass with SOCKBUF_GUARD_BPF",
	     [&] {
		     if (sockbuf_guard_pass(gb, &rep_bpf) < 0 || rep_bpf.below ||
			 rep_bpf.diag != SOCKBUF_GUARD_SRC_BPF)
			     die("sockbuf_guard_pass (SOCKBUF_GUARD_BPF)");
	     },
	     {}},
	    {"BPF iterator, walk only", [&] { walk.pass(); }, {}},
	    {"BPF iterator, read sizes",
	     [&] {
		     if (!read.pass().empty())
			     die("read_sizes: a socket under 4096");
	     },
	     {}},
	};
	for (int r = 0; r < rounds; r++)
		for (auto &s : all) {
			std::vector<double> us;
			for (int p = 0; p < passes; p++) {
				int64_t t = thread_cpu_ns();
				s.pass();
				us.push_back(double(thread_cpu_ns() - t) / 1e3);
			}
			s.round_medians_us.push_back(median(us));
		}
	all[0].name += rep.diag == SOCKBUF_GUARD_SRC_URING  ? ", io_uring"
		       : rep.diag == SOCKBUF_GUARD_SRC_DIAG ? ", inet_diag"
							    : ", getsockopt";
	for (const auto &s : all) {
		auto [lo, hi] =
		    std::minmax_element(s.round_medians_us.begin(), s.round_medians_us.end());
		double m = median(s.round_medians_us);
		fmt::print("| {} | {} | {:.3f} ms | {:.3f}-{:.3f} ms | {:.0f} ns |\n", sockets,
			   s.name, m / 1e3, *lo / 1e3, *hi / 1e3, m * 1e3 / sockets);
	}
	sockbuf_guard_destroy(g);
	sockbuf_guard_destroy(gb);
	for (int fd : fds)
		close(fd);
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		fmt::print(stderr, "usage: bpf_iter_pass OBJECT [SOCKETS...]\n"
				   "  OBJECT: guard_iter.bpf.o; SOCKETS: default 1000 10000\n");
		return 2;
	}
	std::vector<int> sizes;
	for (int i = 2; i < argc; i++) {
		char *end = nullptr;
		long n = strtol(argv[i], &end, 10);
		if (*end || n < 4 || n > 60000 || n % 2)
			die(fmt::format("bad socket count '{}': an even number, 4..60000",
					argv[i]));
		sizes.push_back(int(n));
	}
	if (sizes.empty())
		sizes = {1000, 10000};
	// Room for the largest count: the soft limit up to the hard one.
	rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	for (int n : sizes)
		if (rlim_t(n) + 64 > rl.rlim_cur)
			die(fmt::format("{} sockets need RLIMIT_NOFILE {} (hard limit {})", n,
					n + 64, rl.rlim_cur));
	constexpr int rounds = 5, passes = 40;
	fmt::print("load average before: {}\n", loadavg());
	fmt::print("{} rounds x {} passes per configuration, in turn; CPU per pass\n\n", rounds,
		   passes);
	fmt::print("| sockets | pass | median | spread (round medians) | per socket |\n"
		   "|---|---|---|---|---|\n");
	for (int n : sizes)
		run(argv[1], n, rounds, passes);
	fmt::print("\nload average after: {}\n", loadavg());
	return 0;
}
