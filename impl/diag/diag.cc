// SPDX-License-Identifier: MIT
// inet_diag dumps over NETLINK_SOCK_DIAG.  One request per address family
// (inet_diag answers one family per dump), attributes parsed with the
// lengths the kernel sent, so older kernels with a shorter tcp_info or
// SK_MEMINFO array give -1/0 in the missing fields instead of garbage.
#include "diag.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace sockbuf::diag
{

namespace
{

// Offsets in the kernel's struct tcp_info past the end of glibc's copy
// (glibc stops at tcpi_total_retrans); the kernel layout is ABI.
constexpr size_t tcpi_bytes_acked_off = 120;
constexpr size_t tcpi_bytes_received_off = 128;

constexpr size_t recv_buf_size = 64 * 1024;

uint64_t read_u64(const unsigned char *p, size_t len, size_t off)
{
	uint64_t v = 0;
	if (len >= off + sizeof(v))
		memcpy(&v, p + off, sizeof(v));
	return v;
}

void fill_endpoint(endpoint *e, int family, const __be32 *addr, __be16 port)
{
	e->family = family;
	memcpy(e->addr, addr, family == AF_INET ? 4 : 16);
	e->port = ntohs(port);
}

void parse_meminfo(socket_info *si, const void *data, size_t len)
{
	constexpr size_t vars = SK_MEMINFO_VARS;
	uint32_t mem[vars] = {};
	size_t n = len / sizeof(uint32_t);
	memcpy(mem, data, (n < vars ? n : vars) * sizeof(uint32_t));
	auto get = [&](int idx) -> int64_t { return size_t(idx) < n ? int64_t(mem[idx]) : -1; };
	si->rmem_alloc = get(SK_MEMINFO_RMEM_ALLOC);
	si->rcvbuf = get(SK_MEMINFO_RCVBUF);
	si->wmem_alloc = get(SK_MEMINFO_WMEM_ALLOC);
	si->sndbuf = get(SK_MEMINFO_SNDBUF);
	si->fwd_alloc = get(SK_MEMINFO_FWD_ALLOC);
	si->wmem_queued = get(SK_MEMINFO_WMEM_QUEUED);
	si->drops = get(SK_MEMINFO_DROPS);
}

void parse_tcp_info(socket_info *si, const void *data, size_t len)
{
	struct tcp_info ti = {};
	memcpy(&ti, data, len < sizeof(ti) ? len : sizeof(ti));
	si->has_tcp_info = true;
	si->rtt_us = ti.tcpi_rtt;
	si->rttvar_us = ti.tcpi_rttvar;
	si->options = ti.tcpi_options;
	// The scales mean something only once the handshake agreed on them.
	if (ti.tcpi_options & TCPI_OPT_WSCALE) {
		si->snd_wscale = ti.tcpi_snd_wscale;
		si->rcv_wscale = ti.tcpi_rcv_wscale;
	}
	si->snd_cwnd = ti.tcpi_snd_cwnd;
	si->rcv_space = ti.tcpi_rcv_space;
	auto *raw = static_cast<const unsigned char *>(data);
	si->bytes_acked = read_u64(raw, len, tcpi_bytes_acked_off);
	si->bytes_received = read_u64(raw, len, tcpi_bytes_received_off);
}

socket_info parse_message(const nlmsghdr *h)
{
	auto *m = static_cast<const inet_diag_msg *>(NLMSG_DATA(h));
	socket_info si;
	si.family = m->idiag_family;
	si.state = m->idiag_state;
	si.inode = m->idiag_inode;
	si.uid = m->idiag_uid;
	si.cookie = uint64_t(m->id.idiag_cookie[0]) | uint64_t(m->id.idiag_cookie[1]) << 32;
	fill_endpoint(&si.local, si.family, m->id.idiag_src, m->id.idiag_sport);
	fill_endpoint(&si.remote, si.family, m->id.idiag_dst, m->id.idiag_dport);
	int alen = int(h->nlmsg_len) - int(NLMSG_LENGTH(sizeof(*m)));
	for (auto *a = reinterpret_cast<const rtattr *>(m + 1); RTA_OK(a, alen);
	     a = RTA_NEXT(a, alen)) {
		size_t plen = RTA_PAYLOAD(a);
		if (a->rta_type == INET_DIAG_SKMEMINFO)
			parse_meminfo(&si, RTA_DATA(a), plen);
		else if (a->rta_type == INET_DIAG_INFO)
			parse_tcp_info(&si, RTA_DATA(a), plen);
	}
	return si;
}

void fill_id(inet_diag_sockid *id, const socket_info &si)
{
	memcpy(id->idiag_src, si.local.addr, sizeof(id->idiag_src));
	memcpy(id->idiag_dst, si.remote.addr, sizeof(id->idiag_dst));
	id->idiag_sport = htons(si.local.port);
	id->idiag_dport = htons(si.remote.port);
	id->idiag_cookie[0] = uint32_t(si.cookie);
	id->idiag_cookie[1] = uint32_t(si.cookie >> 32);
}

// Requests per batch: their answers must fit the socket's receive buffer.
constexpr size_t query_batch_max = 128;

bool matches(const socket_info &si, const filter &f)
{
	if (f.local_port && si.local.port != f.local_port)
		return false;
	if (f.remote_port && si.remote.port != f.remote_port)
		return false;
	if (f.any_port && si.local.port != f.any_port && si.remote.port != f.any_port)
		return false;
	return true;
}

// The attributes every request asks for: SK_MEMINFO, and INET_DIAG_INFO
// (tcp_info) where @f wants it.
uint8_t extensions(const filter &f)
{
	uint8_t ext = uint8_t(1u << (INET_DIAG_SKMEMINFO - 1));
	if (f.tcp_info)
		ext |= uint8_t(1u << (INET_DIAG_INFO - 1));
	return ext;
}

// The next datagram of answers on @fd into @buf: its length, or -errno
// (-EIO when the socket reads EOF).  EINTR is retried.
ssize_t recv_answers(int fd, std::vector<char> &buf)
{
	for (;;) {
		ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
		if (n > 0)
			return n;
		if (n == 0)
			return -EIO;
		if (errno != EINTR)
			return -errno;
	}
}

} // namespace

std::string endpoint::str() const
{
	char text[INET6_ADDRSTRLEN] = "?";
	inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, addr, text, sizeof(text));
	char out[INET6_ADDRSTRLEN + 16];
	if (family == AF_INET6)
		snprintf(out, sizeof(out), "[%s]:%u", text, unsigned(port));
	else
		snprintf(out, sizeof(out), "%s:%u", text, unsigned(port));
	return out;
}

session::~session()
{
	if (fd_ >= 0)
		::close(fd_);
}

void session::after_fork()
{
	if (fd_ >= 0)
		::close(fd_);
	fd_ = -1;
	seq_ = 0;
	new (&buf_) std::vector<char>(); // the parent's, perhaps mid-change: left as it is
}

int session::open()
{
	if (fd_ >= 0)
		return 0;
	int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	fd_ = fd;
	buf_.resize(recv_buf_size);
	return 0;
}

int session::dump_family(int family, const filter &f,
			 const std::function<void(const socket_info &)> &fn)
{
	struct {
		nlmsghdr nlh;
		inet_diag_req_v2 req;
	} msg = {};
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	msg.nlh.nlmsg_seq = ++seq_;
	msg.req.sdiag_family = uint8_t(family);
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = f.states;
	msg.req.idiag_ext = extensions(f);

	sockaddr_nl kernel = {};
	kernel.nl_family = AF_NETLINK;
	if (::sendto(fd_, &msg, sizeof(msg), 0, reinterpret_cast<sockaddr *>(&kernel),
		     sizeof(kernel)) < 0)
		return -errno;

	for (;;) {
		ssize_t n = recv_answers(fd_, buf_);
		if (n < 0)
			return int(n);
		size_t left = size_t(n);
		for (auto *h = reinterpret_cast<nlmsghdr *>(buf_.data()); NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != seq_)
				continue; // a late answer to an earlier, abandoned dump
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				auto *e = static_cast<nlmsgerr *>(NLMSG_DATA(h));
				return e->error ? e->error : -EIO;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
				continue;
			socket_info si = parse_message(h);
			if (matches(si, f))
				fn(si);
		}
	}
}

int session::each(const filter &f, const std::function<void(const socket_info &)> &fn)
{
	int ret = open();
	if (ret < 0)
		return ret;
	for (int family : {AF_INET, AF_INET6}) {
		if (f.family && f.family != family)
			continue;
		ret = dump_family(family, f, fn);
		// A kernel built without IPv6 answers ENOENT for that family.
		if (ret == -ENOENT && !f.family && family == AF_INET6)
			ret = 0;
		if (ret < 0)
			return ret;
	}
	return 0;
}

int session::query_batch(const socket_info *which, size_t n, const filter &f,
			 const std::function<void(const socket_info &)> &fn)
{
	struct request {
		nlmsghdr nlh;
		inet_diag_req_v2 req;
	};
	std::vector<request> reqs(n);
	uint32_t first_seq = seq_ + 1;
	for (size_t i = 0; i < n; i++) {
		request &r = reqs[i];
		r.nlh.nlmsg_len = sizeof(request);
		r.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
		r.nlh.nlmsg_flags = NLM_F_REQUEST;
		r.nlh.nlmsg_seq = ++seq_;
		r.req.sdiag_family = uint8_t(which[i].family);
		r.req.sdiag_protocol = IPPROTO_TCP;
		r.req.idiag_states = ~0u;
		r.req.idiag_ext = extensions(f);
		fill_id(&r.req.id, which[i]);
	}
	sockaddr_nl kernel = {};
	kernel.nl_family = AF_NETLINK;
	// One sendto carries the whole batch; the kernel answers each request.
	if (::sendto(fd_, reqs.data(), n * sizeof(request), 0,
		     reinterpret_cast<sockaddr *>(&kernel), sizeof(kernel)) < 0)
		return -errno;
	size_t answered = 0;
	while (answered < n) {
		ssize_t got = recv_answers(fd_, buf_);
		if (got < 0)
			return int(got);
		size_t left = size_t(got);
		for (auto *h = reinterpret_cast<nlmsghdr *>(buf_.data()); NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq < first_seq || h->nlmsg_seq > seq_)
				continue;
			answered++;
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY)
				fn(parse_message(h));
			// NLMSG_ERROR (ENOENT: the socket is gone) just counts.
		}
	}
	return 0;
}

int session::query(const std::vector<socket_info> &which, const filter &f,
		   const std::function<void(const socket_info &)> &fn)
{
	int ret = open();
	for (size_t i = 0; ret == 0 && i < which.size(); i += query_batch_max)
		ret = query_batch(which.data() + i, std::min(query_batch_max, which.size() - i), f,
				  fn);
	return ret;
}

int session::dump(std::vector<socket_info> *out, const filter &f)
{
	if (!out)
		return -EINVAL;
	out->clear();
	return each(f, [out](const socket_info &si) { out->push_back(si); });
}

int dump(std::vector<socket_info> *out, const filter &f)
{
	session s;
	return s.dump(out, f);
}

int each_socket_fd(int pid, const std::function<void(int fd, uint32_t inode)> &fn)
{
	char path[64];
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/fd");
	else
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *fds = opendir(path);
	if (!fds)
		return -errno;
	while (dirent *d = readdir(fds)) {
		char *end = nullptr;
		const long fd = strtol(d->d_name, &end, 10);
		if (*end || d->d_name[0] == '.')
			continue;
		char target[64];
		const ssize_t n = readlinkat(dirfd(fds), d->d_name, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		unsigned long ino = 0;
		if (sscanf(target, "socket:[%lu]", &ino) == 1)
			fn(int(fd), uint32_t(ino));
	}
	closedir(fds);
	return 0;
}

int socket_owners(std::unordered_map<uint32_t, std::vector<owner>> *out)
{
	if (!out)
		return -EINVAL;
	out->clear();
	DIR *proc = opendir("/proc");
	if (!proc)
		return -errno;
	while (dirent *p = readdir(proc)) {
		char *end = nullptr;
		long pid = strtol(p->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		// A process gone, or not ours to read, is left out.
		each_socket_fd(int(pid), [&](int fd, uint32_t ino) {
			(*out)[ino].push_back({int(pid), fd});
		});
	}
	closedir(proc);
	return 0;
}

int64_t socket_inode(int fd)
{
	// A socket first: a file of another kind (FUSE, NFS) is not asked
	// anything, fstat() of one can wait for its server.
	int type = 0;
	socklen_t len = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	return int64_t(st.st_ino);
}

const char *state_name(int state)
{
	static const char *const names[] = {
	    "?",     "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",	"TIME_WAIT",
	    "CLOSE", "CLOSE_WAIT",  "LAST_ACK", "LISTEN",   "CLOSING",	 "NEW_SYN_RECV"};
	if (state < 0 || size_t(state) >= sizeof(names) / sizeof(names[0]))
		return "?";
	return names[state];
}

} // namespace sockbuf::diag
