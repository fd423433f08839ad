// SPDX-License-Identifier: MIT
// A tiny program that reports what the shim did to it: whether the shim
// is loaded, whether this is a secure-execution run, and the lock bits of
// a TCP socket after setsockopt(SO_RCVBUF, 65536).  The exec, exec:drop,
// warning and AT_SECURE tests run it and read its one line of output.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <unistd.h>

int main()
{
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "setsockopt");
	bool shim = sym && dladdr(sym, &info) && info.dli_fname &&
		    std::strstr(info.dli_fname, "libsockbuf-shim.so");
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int value = 65536, lock = -1, rcvbuf = -1;
	socklen_t len = sizeof(int);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof(value)) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &lock, &len) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) != 0) {
		std::perror("shim_child");
		return 1;
	}
	const char *preload = std::getenv("LD_PRELOAD");
	std::printf("secure=%lu shim=%d lock=%d rcvbuf=%d preload=%s\n", getauxval(AT_SECURE),
		    shim ? 1 : 0, lock, rcvbuf, preload && *preload ? preload : "-");
	return 0;
}
