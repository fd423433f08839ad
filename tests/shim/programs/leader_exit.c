// SPDX-License-Identifier: MIT
// A program whose main thread exits first (pthread_exit): another thread,
// once the leader is a zombie, sizes a TCP socket with SO_RCVBUF 65536 and
// prints "lock L rcvbuf R" (SO_BUF_LOCK and the size read back).  The
// seccomp supervisor must still reach the socket (or say why not).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

static pid_t leader;

// The leader's state letter from /proc (Z once it has exited).
static char leader_state(void)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)leader);
	FILE *f = fopen(path, "re");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static void *worker(void *arg)
{
	(void)arg;
	// Bounded: 5 s for the leader to be gone.
	for (int i = 0; i < 5000 && leader_state() != 'Z'; i++) {
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	if (leader_state() != 'Z') {
		printf("leader did not exit\n");
		exit(2);
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int v = 65536, lock = -1, rcv = -1;
	socklen_t len = sizeof(int);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &lock, &len) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len) != 0) {
		perror("leader_exit");
		exit(1);
	}
	printf("lock %d rcvbuf %d\n", lock, rcv);
	fflush(stdout);
	exit(0);
}

int main(void)
{
	leader = getpid();
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}
