// SPDX-License-Identifier: MIT
// Sizes a TCP socket with SO_RCVBUF over and over, from four threads, for
// at most 10 s, after writing "PID PPID" to PIDFILE.  The first call that
// fails writes "errno N" to ERRFILE (a descriptor opened beforehand: one
// write(2), as soon as the call returns) and ends the process with 3.
// supervisor_signals.py kills the supervisor of this program while its
// calls wait on it: a call answered ENOSYS then shows before the program
// is killed.
//
// usage: size_looper PIDFILE ERRFILE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int errfd = -1;
static time_t end;

static void *loop(void *arg)
{
	(void)arg;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int v = 65536;
	while (fd >= 0 && time(NULL) < end) {
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0) {
			char line[32];
			int n = snprintf(line, sizeof(line), "errno %d", errno);
			if (write(errfd, line, (size_t)n) != n)
				_exit(4);
			_exit(3);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	errfd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (errfd < 0)
		return 2;
	end = time(NULL) + 10;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, loop, NULL) != 0)
			return 2;
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.part", argv[1]);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return 2;
	fprintf(f, "%d %d", (int)getpid(), (int)getppid());
	fclose(f);
	if (rename(tmp, argv[1]) != 0)
		return 2;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
