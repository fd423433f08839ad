// SPDX-License-Identifier: MIT
#include "fork_seed.h"

#include "engine.h"

#include <cerrno>
#include <pthread.h>

namespace sockbuf::shim
{

namespace
{

// In the child, right after fork(): the sockets and the shim's per-fd
// table were inherited, the floor registry mapping was not.
void child_after_fork()
{
	const int saved = errno;
	republish_floors();
	errno = saved;
}

} // namespace

bool install_fork_seed()
{
	return pthread_atfork(nullptr, nullptr, child_after_fork) == 0;
}

} // namespace sockbuf::shim
