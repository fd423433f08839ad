// SPDX-License-Identifier: MIT
/*
 * guard_races: the floor guard's safety promises tried the way a program
 * written against the installed library meets them: public API only
 * (<sockbuf/sockbuf.h>, -lsockbuf), real sockets, real threads, real
 * fork().  Timing opens the windows here (the unit tests open them
 * deterministically through the syscall seam); each case runs a few times
 * and prints what happened.
 *
 *   reuse   N guarded sockets all pushed below their floor, so that a pass
 *           restores every one (tens of ms); 1-6 ms into the pass another
 *           socket, small and locked, is dup2'd onto the number of the
 *           last guarded socket.  The other socket must come out as it
 *           went in: size and lock bit.
 *   fork    the guard's own thread passes over N sockets while the program
 *           forks children at random moments; each child calls pass, stats,
 *           remove and destroy under alarm(5).  None may hang.
 *   remove  add, close, a new socket on the same number, add, remove: the
 *           next pass must not touch the new socket.
 *   bpf     (root) a child's remove() must leave the parent's socket
 *           guarded.
 *
 * usage: guard_races [SOCKETS] [RUNS]   (default 4000 sockets, 3 runs)
 * Exit 0 when every case held, 1 otherwise.
 */
#define _GNU_SOURCE
#include <sockbuf/sockbuf.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

enum { floor_size = 131072 };

static int get_int(int s, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(s, SOL_SOCKET, name, &v, &len) != 0)
		return -errno;
	return v;
}

static void set_small(int s)
{
	int small = 4096;
	setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static int *open_guarded(int guard, int n)
{
	int *fds = calloc((size_t)n, sizeof(int));
	struct sockbuf_floor fl = {floor_size, floor_size};
	for (int i = 0; fds && i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 ||
		    sockbuf_set_initial_bufsize(fds[i], floor_size, floor_size, 0, NULL) != 0 ||
		    sockbuf_guard_add(guard, fds[i], &fl) != 0) {
			fprintf(stderr, "guard_races: socket %d: %s\n", i, strerror(errno));
			exit(2);
		}
	}
	return fds;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
}

struct swap {
	int victim, other;
	long delay_us;
};

static void *swap_later(void *arg)
{
	struct swap *w = arg;
	sleep_us(w->delay_us);
	dup2(w->other, w->victim); /* the program closed it; a new socket took the number */
	return NULL;
}

static const char *source_name(int src)
{
	static const char *const names[] = {"getsockopt", "inet_diag", "io_uring", "bpf"};
	return src >= 0 && src < 4 ? names[src] : "?";
}

static int case_reuse(unsigned int flags, const char *label, int n, int runs)
{
	int bad = 0;
	for (int run = 1; run <= runs; run++) {
		int guard = sockbuf_guard_new(flags);
		int *fds = open_guarded(guard, n);
		struct sockbuf_guard_report rep;
		/* The BPF iterator loaded before the pass that counts; without
		 * it, that pass is the guard's first, which reads by io_uring
		 * where the kernel has socket commands (6.7). */
		if (flags & SOCKBUF_GUARD_BPF)
			sockbuf_guard_pass(guard, &rep);
		for (int i = 0; i < n; i++)
			set_small(fds[i]);
		int other = socket(AF_INET, SOCK_STREAM, 0);
		set_small(other);
		const int snd = get_int(other, SO_SNDBUF), lock = get_int(other, SO_BUF_LOCK);
		struct swap w = {fds[n - 1], other, 1000 + 1000 * ((run - 1) % 6)};
		pthread_t t;
		pthread_create(&t, NULL, swap_later, &w);
		sockbuf_guard_pass(guard, &rep);
		pthread_join(t, NULL);
		const int snd_after = get_int(fds[n - 1], SO_SNDBUF);
		const int lock_after = get_int(fds[n - 1], SO_BUF_LOCK);
		const int ok = snd_after == snd && lock_after == lock;
		bad += !ok;
		printf("reuse  %-10s run %d: pass %.1f ms via %s, dup2 at %ld ms, restored %d, "
		       "reused %d; other socket %d/%s -> %d/%s: %s\n",
		       label, run, (double)rep.duration_ns / 1e6, source_name(rep.diag),
		       w.delay_us / 1000, rep.restored, rep.reused, snd,
		       lock ? "locked" : "unlocked", snd_after, lock_after ? "locked" : "unlocked",
		       ok ? "untouched" : "WRITTEN THROUGH");
		close(other);
		close_all(fds, n);
		sockbuf_guard_destroy(guard);
	}
	return bad;
}

static int case_fork(int n, int children)
{
	int guard = sockbuf_guard_new(SOCKBUF_GUARD_RUN_IN_CHILD);
	int *fds = open_guarded(guard, n);
	sockbuf_guard_start(guard, 1000);
	int hung = 0, failed = 0;
	for (int c = 0; c < children; c++) {
		for (int i = 0; i < n; i += 7)
			set_small(fds[i]); /* passes with restores: longer */
		sleep_us(random() % 5000);
		pid_t pid = fork();
		if (pid == 0) {
			alarm(5);
			struct sockbuf_guard_report rep;
			struct sockbuf_guard_totals tot;
			int ok = sockbuf_guard_pass(guard, &rep) == 0 &&
				 sockbuf_guard_stats(guard, &tot) == 0 &&
				 sockbuf_guard_remove(guard, fds[0]) == 0 &&
				 sockbuf_guard_destroy(guard) == 0;
			_exit(ok ? 0 : 1);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		if (WIFSIGNALED(status))
			hung++;
		else if (WEXITSTATUS(status) != 0)
			failed++;
	}
	struct sockbuf_guard_totals tot;
	sockbuf_guard_stats(guard, &tot);
	printf("fork   %d children forked while the guard thread passed over %d sockets "
	       "(%llu passes, longest %.1f ms): %d held up (killed by alarm), %d failed\n",
	       children, n, (unsigned long long)tot.passes, (double)tot.max_pass_ns / 1e6, hung,
	       failed);
	sockbuf_guard_destroy(guard);
	close_all(fds, n);
	return hung + failed;
}

static int case_remove(void)
{
	int guard = sockbuf_guard_new(0);
	int *fds = open_guarded(guard, 1);
	int s = fds[0], second = socket(AF_INET, SOCK_STREAM, 0);
	dup2(second, s); /* close + a new socket on the number */
	close(second);
	set_small(s);
	struct sockbuf_floor fl = {floor_size, floor_size};
	const int snd = get_int(s, SO_SNDBUF);
	int add = sockbuf_guard_add(guard, s, &fl), rem = sockbuf_guard_remove(guard, s);
	struct sockbuf_guard_report rep;
	sockbuf_guard_pass(guard, &rep);
	const int ok = add == 0 && rem == 0 && get_int(s, SO_SNDBUF) == snd && rep.restored == 0;
	printf("remove add/close/reuse/add/remove: add %d, remove %d, next pass restored %d, "
	       "new socket %d -> %d: %s\n",
	       add, rem, rep.restored, snd, get_int(s, SO_SNDBUF),
	       ok ? "untouched" : "RESTORED AFTER REMOVE");
	sockbuf_guard_destroy(guard);
	close_all(fds, 1);
	return !ok;
}

static int case_bpf(void)
{
	int guard = sockbuf_guard_new(SOCKBUF_GUARD_BPF);
	int *fds = open_guarded(guard, 1);
	struct sockbuf_guard_report rep;
	sockbuf_guard_pass(guard, &rep);
	if (rep.diag != SOCKBUF_GUARD_SRC_BPF) {
		struct sockbuf_guard_totals tot;
		sockbuf_guard_stats(guard, &tot);
		printf("bpf    skipped: no BPF pass here (%s)\n", strerror(-tot.bpf_err));
		sockbuf_guard_destroy(guard);
		close_all(fds, 1);
		return 0;
	}
	pid_t pid = fork();
	if (pid == 0)
		_exit(sockbuf_guard_remove(guard, fds[0]) == 0 ? 0 : 1);
	int status = 0;
	waitpid(pid, &status, 0);
	set_small(fds[0]);
	sockbuf_guard_pass(guard, &rep);
	const int ok = rep.removed == 0 && get_int(fds[0], SO_SNDBUF) >= floor_size;
	printf("bpf    child removed the socket from its copy; parent's pass: removed %d, "
	       "restored %d: %s\n",
	       rep.removed, rep.restored, ok ? "still guarded" : "DROPPED BY THE CHILD");
	sockbuf_guard_destroy(guard);
	close_all(fds, 1);
	return !ok;
}

int main(int argc, char **argv)
{
	const int n = argc > 1 ? atoi(argv[1]) : 4000;
	const int runs = argc > 2 ? atoi(argv[2]) : 3;
	if (n < 2 || runs < 1) {
		fprintf(stderr, "usage: guard_races [SOCKETS >= 2] [RUNS >= 1]\n");
		return 2;
	}
	struct rlimit rl = {(rlim_t)n + 64, (rlim_t)n + 64};
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < (rlim_t)n + 64) {
			fprintf(stderr, "guard_races: %d sockets need RLIMIT_NOFILE %d\n", n,
				n + 64);
			return 2;
		}
	}
	srandom((unsigned int)getpid());
	int bad = 0;
	bad += case_reuse(SOCKBUF_GUARD_NO_DIAG, "first", n, runs);
	bad += case_reuse(SOCKBUF_GUARD_BPF | SOCKBUF_GUARD_NO_DIAG, "bpf-asked", n, runs);
	bad += case_fork(n, 20);
	bad += case_remove();
	bad += case_bpf();
	printf("%s\n", bad ? "guard_races: FAILED" : "guard_races: every case held");
	return bad ? 1 : 0;
}
