// SPDX-License-Identifier: MIT
// Command-line parsing shared by the example transports: --key=value
// options, sizes with K/M/G suffixes, and the --bufs switch.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples
{

// A bad argument: main() prints it with the usage text and exits 2.
struct usage_error : std::runtime_error {
	using std::runtime_error::runtime_error;
};

// --key=value and --flag arguments; anything else is a usage_error.
class options
{
public:
	// allowed: the option names this program knows (without "--").
	options(int argc, char **argv, const std::vector<std::string> &allowed);

	bool has(const std::string &key) const { return values_.count(key) != 0; }
	std::string str(const std::string &key, const std::string &fallback) const;
	// Sizes: 4096, 128K, 1M, 2G (powers of 1024).
	uint64_t size(const std::string &key, uint64_t fallback, uint64_t min, uint64_t max) const;
	// Plain integers.
	long num(const std::string &key, long fallback, long min, long max) const;
	// Seconds, fractions allowed: 0.5, 10.
	double seconds(const std::string &key, double fallback, double min, double max) const;

private:
	std::map<std::string, std::string> values_;
};

uint64_t parse_size(const std::string &text);

// The shared main(): parses @allowed options, answers --help with @usage,
// runs @run, and turns a usage_error into exit 2 (with @usage) and any
// other exception into exit 1, each message prefixed with @prog.
int run_main(int argc, char **argv, const char *prog, const char *usage,
	     const std::vector<std::string> &allowed, int (*run)(const options &));

// How a transport sizes its sockets: leave them to the kernel, an initial
// size with autotuning kept on, a locked size (autotuning off), or raw:
// the initial-size recipe by hand, without the library (setsockopt
// SO_SNDBUF/SO_RCVBUF, then SO_BUF_LOCK 0), the baseline the library is
// measured against.
enum class bufs_mode { kernel_default, initial, lock, raw };

bufs_mode parse_bufs(const std::string &text);
const char *bufs_name(bufs_mode m);

// "ADDR:PORT" (IPv4) split into its parts.
struct endpoint {
	std::string addr;
	uint16_t port;
};
endpoint parse_endpoint(const std::string &text);

} // namespace examples
