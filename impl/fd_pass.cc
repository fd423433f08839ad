// SPDX-License-Identifier: MIT
// Passing a descriptor over a unix socket (SCM_RIGHTS).
#include "fd_pass.h"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

namespace sockbuf::fd_pass
{

namespace
{

// One message: the bytes @iov names, and the control space @ctl.
template <size_t N> struct msghdr message(struct iovec *iov, char (&ctl)[N])
{
	struct msghdr mh = {};
	mh.msg_iov = iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl;
	mh.msg_controllen = N;
	return mh;
}

} // namespace

int take_fds(struct msghdr *mh)
{
	int fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		const size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int got;
			std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (fd < 0)
				fd = got;
			else
				close(got);
		}
	}
	return fd;
}

int send_fd(int sock, const void *data, size_t len, int fd)
{
	struct iovec iov = {const_cast<void *>(data), len};
	alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
	struct msghdr mh = message(&iov, ctl);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	const ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return size_t(n) == len ? 0 : -EIO;
}

int recv_fd(int sock, void *data, size_t len)
{
	struct iovec iov = {data, len};
	// Room for one descriptor is, once padded, room for two on 64-bit
	// targets: a sender may put in more than one, and each one that
	// arrives is this process's to close.
	alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
	struct msghdr mh = message(&iov, ctl);
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	const int fd = take_fds(&mh);
	if (size_t(n) != len || fd < 0) {
		if (fd >= 0)
			close(fd);
		return -EPIPE;
	}
	return fd;
}

} // namespace sockbuf::fd_pass
