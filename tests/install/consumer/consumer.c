/* SPDX-License-Identifier: MIT */
/* Links against an installed libsockbuf and uses it from C. */
#include <sockbuf/sockbuf.h>

#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	struct sockbuf_report rep;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int ret = sockbuf_set_initial_bufsize(fd, 131072, 131072, SOCKBUF_F_FALLBACK_LOCK, &rep);
	close(fd);
	if (ret < 0 || rep.rcv.effective != 131072 || sockbuf_version() != SOCKBUF_VERSION) {
		fprintf(stderr, "consumer: ret %d rcv %d\n", ret, rep.rcv.effective);
		return 1;
	}
	printf("consumer: rcv %d via %s\n", rep.rcv.effective,
	       sockbuf_strategy_name(rep.rcv.strategy));
	return 0;
}
