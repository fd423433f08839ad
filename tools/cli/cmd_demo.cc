// SPDX-License-Identifier: MIT
// sockbuf demo [--bytes N] [--size N]: three listeners on loopback, one
// untouched, one through set_initial_bufsize, one through lock_bufsize, and
// what the kernel shows for each during a bounded bulk transfer.
#include "commands.h"
#include "loopback.h"

#include <sockbuf/format.hpp>
#include <sockbuf/sockbuf.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/core.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace sockbuf::cli
{

namespace
{

bool parse_size(const char *s, long long *out)
{
	char *end = nullptr;
	errno = 0;
	long long v = std::strtoll(s, &end, 10);
	if (errno || end == s || v <= 0)
		return false;
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end != '\0')
		return false;
	*out = v;
	return true;
}

const char *lock_word(int lock)
{
	return lock < 0	   ? "?"
	       : lock == 0 ? "no"
	       : lock == 3 ? "snd+rcv"
	       : lock == 1 ? "snd"
			   : "rcv";
}

int run_one(const char *name, const lab::setup_fn &setup, long long bytes, std::string *line)
{
	lab::transfer_result r = lab::bulk_transfer((uint64_t)bytes, 20.0, setup, setup);
	if (r.err) {
		fmt::print(stderr, "sockbuf demo: {}: {} failed: {}\n", name, r.what,
			   std::strerror(-r.err));
		return 1;
	}
	*line =
	    fmt::format("{:<12} {:>10} {:>10} {:>10} {:>8} {:>7} {:>9.1f} {}", name,
			r.server_rcvbuf.first, r.server_rcvbuf.min, r.server_rcvbuf.max,
			lock_word(r.server_lock), r.server_rcv_wscale, r.bytes / r.seconds / 1e6,
			r.corrupt		     ? "CORRUPT"
			: r.bytes == (uint64_t)bytes ? "ok"
						     : "short");
	return r.corrupt ? 1 : 0;
}

} // namespace

int cmd_demo(int argc, char **argv)
{
	long long bytes = 64ll << 20, size = 128 << 10;
	for (int i = 1; i < argc; i++) {
		if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
			fmt::print(
			    "usage: sockbuf demo [--bytes N[K|M]] [--size N[K|M]]\n"
			    "\n"
			    "What set_initial_bufsize and lock_bufsize report on fresh TCP\n"
			    "sockets, then three bulk transfers over loopback (untouched,\n"
			    "set_initial, lock) with the receiver's buffer, lock bits, window\n"
			    "scale and throughput.  --bytes: per transfer (default 64M);\n"
			    "--size: the size given (default 128K).\n"
			    "\n"
			    "Exit status: 0, 1 a transfer failed, 2 usage.\n");
			return 0;
		}
		bool ok = i + 1 < argc;
		if (ok && !std::strcmp(argv[i], "--bytes"))
			ok = parse_size(argv[++i], &bytes);
		else if (ok && !std::strcmp(argv[i], "--size"))
			ok = parse_size(argv[++i], &size) && size <= SOCKBUF_SIZE_MAX;
		else
			ok = false;
		if (!ok) {
			fmt::print(stderr,
				   "sockbuf demo: {}: want --bytes N[K|M] or --size N[K|M] "
				   "(sockbuf demo --help)\n",
				   i + 1 < argc || argv[i][0] != '-'
				       ? fmt::format("bad argument '{}'", argv[i])
				       : fmt::format("'{}' needs a value", argv[i]));
			return 2;
		}
	}
	int isize = (int)size;

	fmt::print("What each call reports, on a fresh TCP socket:\n");
	for (int lock = 0; lock < 2; lock++) {
		int fd = ::socket(AF_INET, SOCK_STREAM, 0);
		auto rep = lock ? sockbuf::lock_bufsize(fd, {isize, isize})
				: sockbuf::set_initial_bufsize(fd, {isize, isize});
		if (rep)
			fmt::print("  {:<20} {}\n", lock ? "lock_bufsize" : "set_initial_bufsize",
				   *rep);
		else
			fmt::print("  {:<20} error: {}\n",
				   lock ? "lock_bufsize" : "set_initial_bufsize",
				   rep.error().message());
		::close(fd);
	}

	fmt::print(
	    "\nBulk transfer of {} bytes over loopback, sizes applied before listen()/connect():\n",
	    bytes);
	fmt::print("{:<12} {:>10} {:>10} {:>10} {:>8} {:>7} {:>9} {}\n", "config", "rcvbuf@0",
		   "min", "max", "locked", "wscale", "MB/s", "data");
	lab::setup_fn untouched = [](int) { return 0; };
	lab::setup_fn initial = [isize](int fd) {
		return sockbuf_set_initial_bufsize(fd, isize, isize, SOCKBUF_F_FALLBACK_LOCK,
						   nullptr);
	};
	lab::setup_fn locked = [isize](int fd) {
		return sockbuf_lock_bufsize(fd, isize, isize, 0, nullptr);
	};
	int status = 0;
	const struct {
		const char *name;
		const lab::setup_fn *fn;
	} configs[] = {{"untouched", &untouched}, {"initial", &initial}, {"lock", &locked}};
	for (const auto &c : configs) {
		std::string line;
		status |= run_one(c.name, *c.fn, bytes, &line);
		if (!line.empty())
			fmt::print("{}\n", line);
	}
	fmt::print("\ninitial: starts at the size asked, unlocked, full window scale, grows.\n"
		   "lock:    starts at the same size, locked, small window scale, never grows.\n");
	return status;
}

} // namespace sockbuf::cli
