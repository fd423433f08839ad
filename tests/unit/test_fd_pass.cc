// SPDX-License-Identifier: MIT
// Passing a descriptor over a unix socket (impl/internal/fd_pass.h): the
// descriptor received names the file sent and is closed on exec; a
// message without one, or of the wrong length, is -EPIPE; a message with
// two leaves this process one descriptor more, not two.
#include "fd_pass.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fd_pass = sockbuf::fd_pass;

namespace
{

struct pair {
	int s[2] = {-1, -1};
	pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0); }
	~pair()
	{
		for (int fd : s)
			if (fd >= 0)
				close(fd);
	}
};

// A file of its own, to tell which one a descriptor names.
int new_file(const char *name)
{
	return memfd_create(name, MFD_CLOEXEC);
}

bool same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

int open_descriptors()
{
	int n = 0;
	for (const auto &d : std::filesystem::directory_iterator("/proc/self/fd")) {
		(void)d;
		n++;
	}
	return n;
}

} // namespace

TEST(FdPass, TheDescriptorReceivedNamesTheFileSent)
{
	pair p;
	const int file = new_file("fd_pass_one");
	ASSERT_GE(file, 0);
	const char sent[] = "abcd";
	ASSERT_EQ(fd_pass::send_fd(p.s[0], sent, 4, file), 0);
	char got[4] = {};
	const int fd = fd_pass::recv_fd(p.s[1], got, sizeof(got));
	ASSERT_GE(fd, 0) << std::strerror(-fd);
	EXPECT_NE(fd, file);
	EXPECT_TRUE(same_file(fd, file));
	EXPECT_EQ(std::memcmp(got, sent, 4), 0);
	EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);
	close(file);
}

TEST(FdPass, AMessageWithoutADescriptorIsEpipe)
{
	pair p;
	ASSERT_EQ(send(p.s[0], "L", 1, MSG_NOSIGNAL), 1);
	char byte;
	EXPECT_EQ(fd_pass::recv_fd(p.s[1], &byte, 1), -EPIPE);
	// The peer gone: end of stream, no descriptor.
	close(p.s[0]);
	p.s[0] = -1;
	EXPECT_EQ(fd_pass::recv_fd(p.s[1], &byte, 1), -EPIPE);
}

TEST(FdPass, AShortMessageIsEpipeAndItsDescriptorClosed)
{
	pair p;
	const int file = new_file("fd_pass_short");
	ASSERT_GE(file, 0);
	ASSERT_EQ(fd_pass::send_fd(p.s[0], "L", 1, file), 0);
	const int before = open_descriptors();
	char got[8];
	EXPECT_EQ(fd_pass::recv_fd(p.s[1], got, sizeof(got)), -EPIPE);
	EXPECT_EQ(open_descriptors(), before);
	close(file);
}

TEST(FdPass, ASecondDescriptorInTheMessageIsClosed)
{
	pair p;
	const int files[2] = {new_file("fd_pass_first"), new_file("fd_pass_second")};
	ASSERT_GE(files[0], 0);
	ASSERT_GE(files[1], 0);
	char byte = 'L';
	struct iovec iov = {&byte, 1};
	alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(files))] = {};
	struct msghdr mh = {};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl;
	mh.msg_controllen = sizeof(ctl);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(files));
	std::memcpy(CMSG_DATA(c), files, sizeof(files));
	ASSERT_EQ(sendmsg(p.s[0], &mh, MSG_NOSIGNAL), 1);

	const int before = open_descriptors();
	const int fd = fd_pass::recv_fd(p.s[1], &byte, 1);
	ASSERT_GE(fd, 0) << std::strerror(-fd);
	EXPECT_EQ(open_descriptors(), before + 1);
	EXPECT_TRUE(same_file(fd, files[0]));
	close(fd);
	close(files[0]);
	close(files[1]);
}

TEST(FdPass, SendingOnAClosedPairIsEpipeWithoutSigpipe)
{
	pair p;
	close(p.s[1]);
	p.s[1] = -1;
	const int file = new_file("fd_pass_closed");
	ASSERT_GE(file, 0);
	// Without MSG_NOSIGNAL this would end the test program (SIGPIPE).
	EXPECT_EQ(fd_pass::send_fd(p.s[0], "L", 1, file), -EPIPE);
	close(file);
}
