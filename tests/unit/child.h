// SPDX-License-Identifier: MIT
// For the tests that check something in a forked child (a process without
// a capability, a child sharing the parent's sockets): the child reports by
// its exit code, 0 for success, and the parent waits for it here.
#pragma once

#include <gtest/gtest.h>

#include <sys/types.h>
#include <sys/wait.h>

namespace sockbuf::test
{

// Waits for the child @pid and expects it to have exited 0; @codes says
// what its other exit codes mean.  Fatal failures (no such child, killed by
// a signal) end only this function: wrap the call in
// ASSERT_NO_FATAL_FAILURE where the test goes on after it.
inline void expect_child_exited_0(pid_t pid, const char *codes)
{
	int status = 0;
	ASSERT_EQ(::waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(WEXITSTATUS(status), 0) << codes;
}

} // namespace sockbuf::test
