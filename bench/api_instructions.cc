// SPDX-License-Identifier: MIT
// Runs one public call, or the raw sequence it issues, a fixed number of
// times on one unconnected TCP socket, so that
//   valgrind --tool=callgrind --toggle-collect=run_loop sockbuf_api_instructions CALL api|raw
// counts the user-space instructions per call (the kernel's work is not
// counted by callgrind): the library's own cost, free of timing noise.
#include "raw_sequences.h"

#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace
{

constexpr int iterations = 10000;
constexpr int request = 262144;

// One call of the chosen kind; returns < 0 on failure.
int call_once(int fd, const char *call, bool api)
{
	static struct sockbuf_report rep;
	static struct sockbuf_state st;
	static const struct sockbuf_floor floor = {request / 2, request / 2};
	if (std::strcmp(call, "set_initial") == 0)
		return api ? sockbuf_set_initial_bufsize(fd, request, request, 0, &rep)
			   : raw::set_initial(fd, request, request);
	if (std::strcmp(call, "lock") == 0)
		return api ? sockbuf_lock_bufsize(fd, request, request, 0, &rep)
			   : raw::lock(fd, request, request);
	if (std::strcmp(call, "get_state") == 0)
		return api ? sockbuf_get_state(fd, &st) : raw::get_state(fd, &st);
	if (std::strcmp(call, "check_floor") == 0)
		return api ? sockbuf_check_floor(fd, &floor, nullptr)
			   : raw::check_floor(fd, &floor);
	return -2;
}

} // namespace

// Not static and not inlined: callgrind's --toggle-collect names it.
extern "C" __attribute__((noinline)) int run_loop(int fd, const char *call, bool api)
{
	for (int i = 0; i < iterations; i++) {
		int ret = call_once(fd, call, api);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (std::strcmp(argv[2], "api") != 0 && std::strcmp(argv[2], "raw") != 0)) {
		std::fprintf(stderr, "usage: %s set_initial|lock|get_state|check_floor api|raw\n",
			     argv[0]);
		return 2;
	}
	sockbuf_probe(nullptr, 0); // fill the probe cache outside the counted loop
	int fd = ::socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		std::perror("socket");
		return 1;
	}
	int ret = run_loop(fd, argv[1], std::strcmp(argv[2], "api") == 0);
	::close(fd);
	if (ret == -2) {
		std::fprintf(stderr, "unknown call '%s'\n", argv[1]);
		return 2;
	}
	if (ret < 0) {
		std::fprintf(stderr, "%s %s failed: %d\n", argv[1], argv[2], ret);
		return 1;
	}
	std::printf("%d iterations of %s %s\n", iterations, argv[1], argv[2]);
	return 0;
}
