// SPDX-License-Identifier: MIT
// The least a call trapped by a seccomp user notification can cost: a
// child traps setsockopt(SO_RCVBUF) and its parent answers each
// notification at once with SECCOMP_USER_NOTIF_FLAG_CONTINUE (the kernel
// then runs the call itself), with and without synchronous wakeups
// (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 6.6).  The plain call is measured
// in the same run.  This is the round trip of `sockbuf run --via seccomp`
// with no work in it: the supervisor can only add to it.
//
//   sockbuf_notif_round_trip [CALLS] [ROUNDS]     (default 200000 5)
//
// Prints one line per kind: the median and range over the rounds, in ns.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

// ns per setsockopt(SO_RCVBUF) over @calls calls on one TCP socket.
static double time_calls(long calls)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int v = 65536;
	if (fd < 0)
		return -1;
	double t = now_ns();
	for (long i = 0; i < calls; i++)
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0)
			return -1;
	t = (now_ns() - t) / calls;
	close(fd);
	return t;
}

static int send_fd(int sock, int fd)
{
	char c = 0, cb[CMSG_SPACE(sizeof(int))];
	struct iovec io = {&c, 1};
	struct msghdr m = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	char c, cb[CMSG_SPACE(sizeof(int))];
	struct iovec io = {&c, 1};
	struct msghdr m = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb)};
	if (recvmsg(sock, &m, 0) != 1 || !CMSG_FIRSTHDR(&m))
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	return fd;
}

// The child: traps setsockopt, hands the listener over, waits for the go,
// times @calls calls and writes the figure back.
static void child(int sock, long calls)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setsockopt, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		_exit(1);
	int nfd =
	    syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (nfd < 0 || send_fd(sock, nfd) != 0)
		_exit(1);
	close(nfd);
	char go;
	if (read(sock, &go, 1) != 1)
		_exit(1);
	double t = time_calls(calls);
	_exit(write(sock, &t, sizeof(t)) == sizeof(t) && t > 0 ? 0 : 1);
}

// One round trapped: ns per call, or -1.
static double trapped(long calls, int sync)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[1]);
		child(sv[0], calls);
	}
	close(sv[0]);
	int nfd = recv_fd(sv[1]);
	double t = -1;
	if (nfd >= 0 &&
	    (!sync || ioctl(nfd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
			    0) == 0) &&
	    write(sv[1], "g", 1) == 1) {
		struct seccomp_notif req;
		struct seccomp_notif_resp resp;
		for (long i = 0; i < calls; i++) {
			memset(&req, 0, sizeof(req));
			if (ioctl(nfd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0)
				break;
			memset(&resp, 0, sizeof(resp));
			resp.id = req.id;
			resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			if (ioctl(nfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0)
				break;
		}
		if (read(sv[1], &t, sizeof(t)) != sizeof(t))
			t = -1;
	}
	if (nfd >= 0)
		close(nfd);
	close(sv[1]);
	int status;
	waitpid(pid, &status, 0);
	return t;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const char *what, double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp);
	if (v[0] < 0) {
		printf("%-40s not measured (the kernel refused a step)\n", what);
		return;
	}
	printf("%-40s median %6.0f ns  range %.0f-%.0f ns\n", what, v[n / 2], v[0], v[n - 1]);
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	if (calls <= 0 || calls > 100000000 || rounds <= 0 || rounds > 100) {
		fprintf(stderr, "usage: %s [CALLS 1-100000000] [ROUNDS 1-100]\n", argv[0]);
		return 2;
	}
	double plain[100], slow[100], fast[100];
	// Side by side: each round measures the three in turn.
	for (int r = 0; r < rounds; r++) {
		plain[r] = time_calls(calls);
		slow[r] = trapped(calls, 0);
		fast[r] = trapped(calls, 1);
	}
	report("setsockopt(SO_RCVBUF), plain", plain, rounds);
	report("trapped, CONTINUE at once", slow, rounds);
	report("trapped, CONTINUE at once, sync wakeup", fast, rounds);
	return 0;
}
