// SPDX-License-Identifier: MIT
// The closer pool (tools/remote/closer.h): copies are really closed, in this
// process and in a forked copy of it, whose pool has none of the parent's
// threads.  A copy left open would keep another process's socket alive.
#include "closer.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace
{

using sockbuf::cli::remote::closer;

// Whether @peer sees its other end closed within @ms (EOF): the last
// reference to the other end is gone.
bool peer_sees_close(int peer, int ms)
{
	struct pollfd p = {peer, POLLIN, 0};
	if (poll(&p, 1, ms) != 1)
		return false;
	char c;
	return read(peer, &c, 1) == 0;
}

TEST(Closer, ClosesTheCopy)
{
	int sv[2];
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	closer::get().close_later(sv[0], getuid());
	EXPECT_TRUE(peer_sees_close(sv[1], 5000));
	close(sv[1]);
}

TEST(Closer, AForkedCopyClosesItsCopies)
{
	// The pool has a thread in this process before the fork.
	int warm[2];
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, warm), 0);
	closer::get().close_later(warm[0], getuid());
	ASSERT_TRUE(peer_sees_close(warm[1], 5000));
	close(warm[1]);

	int sv[2], hold[2];
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ASSERT_EQ(pipe2(hold, O_CLOEXEC), 0);
	const pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		// The child alone holds sv[0] once the parent closed its own:
		// its pool must close it while the child lives on.
		close(sv[1]);
		close(hold[1]);
		closer::get().close_later(sv[0], getuid());
		char c;
		(void)!read(hold[0], &c, 1); // until the parent has looked
		_exit(0);
	}
	close(sv[0]);
	close(hold[0]);
	const bool closed = peer_sees_close(sv[1], 5000);
	close(hold[1]);
	int status = 0;
	ASSERT_EQ(waitpid(child, &status, 0), child);
	EXPECT_TRUE(closed) << "the forked copy's close_later() never closed its copy";
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sv[1]);
}

} // namespace
