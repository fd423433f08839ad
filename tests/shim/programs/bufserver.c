// SPDX-License-Identifier: MIT
// The C twin of bufserver.go, linked with -static: libc's setsockopt is
// inside the program, out of the preloaded shim's reach.  Same usage and
// output (CRC-32, as zlib and Go's hash/crc32 compute it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
	static uint32_t table[256];
	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	crc = ~crc;
	while (n--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static int rcvbuf(int fd)
{
	int v = -1;
	socklen_t len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 ? v : -1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bufserver ADDR:PORT BYTES SIZE\n");
		return 2;
	}
	char host[64];
	snprintf(host, sizeof(host), "%s", argv[1]);
	char *colon = strrchr(host, ':');
	if (!colon)
		return 2;
	*colon = '\0';
	long long total = atoll(argv[2]);
	int size = atoi(argv[3]);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	inet_pton(AF_INET, host, &sa.sin_addr);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) != 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 8) != 0) {
		perror("listen");
		return 1;
	}
	printf("listening pid=%d readback=%d\n", (int)getpid(), rcvbuf(lfd));
	fflush(stdout);
	int cfd = accept(lfd, NULL, NULL);
	if (cfd < 0 || setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) != 0) {
		perror("accept");
		return 1;
	}
	int cread = rcvbuf(cfd);
	uint32_t h = 0;
	long long got = 0;
	static unsigned char buf[1 << 16];
	while (got < total) {
		ssize_t n = read(cfd, buf, sizeof(buf));
		if (n <= 0) {
			perror("read");
			return 1;
		}
		h = crc32_update(h, buf, (size_t)n);
		got += n;
	}
	printf("received %lld crc32=%08x fd=%d readback=%d\n", got, (unsigned)h, cfd, cread);
	fflush(stdout);
	char line[8];
	if (!fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	close(cfd);
	close(lfd);
	return 0;
}
