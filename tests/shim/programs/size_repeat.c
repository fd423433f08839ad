// SPDX-License-Identifier: MIT
// Sizes sockets the way tests/shim/syscall_budget.py counts them: one
// socket sized once (the shim's one-time probe happens there), then a
// fresh socket sized three times.  Each step ends with a marker line
// written with one write(2), so that a trace tells the steps apart.
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int mark(const char *m)
{
	return write(1, m, strlen(m)) == (ssize_t)strlen(m) ? 0 : 1;
}

static int size(int fd)
{
	int v = 65536;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0) {
		perror("setsockopt");
		return 1;
	}
	return 0;
}

int main(void)
{
	int warm = socket(AF_INET, SOCK_STREAM, 0);
	if (warm < 0 || size(warm) || mark("mark 0\n"))
		return 1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || mark("mark 1\n"))
		return 1;
	for (int i = 2; i <= 4; i++) {
		char m[16];
		snprintf(m, sizeof(m), "mark %d\n", i);
		if (size(fd) || mark(m))
			return 1;
	}
	return 0;
}
