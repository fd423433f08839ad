// SPDX-License-Identifier: MIT
// A static program for the supervisor's floor guard (supervised_guard.py):
// a loopback listener and one connection to it whose SO_SNDBUF the
// program sets (under `sockbuf run --via seccomp`: a floor of twice the
// size).  Commands on standard input, one a line:
//   reuse  close the connection and make a new one, which takes the same
//          fd number (the lowest free), connected again; its SO_SNDBUF is
//          not set
//   quit   (or end of input) exit 0
// It prints "ready pid=P fd=N" and "reused fd=N".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int connect_to(const struct sockaddr_in *sa, int size)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (size && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) != 0)
		return -1;
	return connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? fd : -1;
}

int main(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(l, 8) != 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &len) != 0) {
		perror("listen");
		return 1;
	}
	int a = connect_to(&sa, 65536);
	int acc = a < 0 ? -1 : accept(l, NULL, NULL);
	if (acc < 0) {
		perror("connect");
		return 1;
	}
	printf("ready pid=%d fd=%d\n", (int)getpid(), a);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4) != 0) {
		if (strncmp(line, "reuse", 5) != 0)
			continue;
		close(a);
		close(acc);
		a = connect_to(&sa, 0);
		acc = a < 0 ? -1 : accept(l, NULL, NULL);
		if (acc < 0) {
			perror("reuse");
			return 1;
		}
		printf("reused fd=%d\n", a);
		fflush(stdout);
	}
	return 0;
}
