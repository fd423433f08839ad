// SPDX-License-Identifier: MIT
// sockbuf run [--policy NAME] [--config STRING] [--log DEST] [--shim PATH] -- CMD ARGS...
//
// Runs CMD with libsockbuf-shim.so preloaded and SOCKBUF_SHIM set, so an
// unchanged program gets sockbuf's behaviour (shim/README.md).
#include "commands.h"

#if __has_include("config.h") // shim/: the same parser the shim uses
#include "config.h"
#define SOCKBUF_RUN_CHECKS_CONFIG 1
#endif

#include <fmt/core.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace sockbuf::cli
{

namespace
{

constexpr const char *shim_file = "libsockbuf-shim.so";

int run_usage(std::FILE *to, int status)
{
	fmt::print(to,
		   "usage: sockbuf run [--policy passthrough|initial|lock] [--config STRING]\n"
		   "                   [--log stderr|fd=N|/path] [--floor-guard MS] [--reserve]\n"
		   "                   [--shim PATH] -- CMD [ARGS...]\n"
		   "\n"
		   "Runs CMD with the sockbuf shim preloaded.  --policy sets the policy for\n"
		   "the program's SO_SNDBUF/SO_RCVBUF requests (default initial: the size\n"
		   "becomes an unlocked starting size).  --config adds further items in the\n"
		   "shim's grammar, e.g. 'default_rcv:256K,port=2049:lock'.  The shim is found\n"
		   "with --shim, $SOCKBUF_SHIM_PATH, next to this program (../lib) or in the\n"
		   "install libdir.  Programs CMD executes inherit the shim unless the\n"
		   "configuration says exec:drop.  --floor-guard MS runs a thread in CMD that\n"
		   "restores, every MS milliseconds, each buffer the shim sized that fell below\n"
		   "its floor (configuration item guard:MS; off by default).  --reserve also\n"
		   "reserves each connecting and accepted socket's floor with SO_RESERVE_MEM\n"
		   "where the process's memory cgroup allows it (item reserve:on; see\n"
		   "'sockbuf probe').\n");
	return status;
}

std::string exe_dir()
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return {};
	buf[n] = '\0';
	std::string path(buf);
	return path.substr(0, path.rfind('/'));
}

std::string canonical_if_exists(const std::string &path)
{
	char buf[PATH_MAX];
	if (access(path.c_str(), R_OK) != 0 || !realpath(path.c_str(), buf))
		return {};
	return buf;
}

std::string find_shim(const char *given)
{
	std::vector<std::string> candidates;
	if (given)
		candidates.push_back(given);
	else if (const char *env = std::getenv("SOCKBUF_SHIM_PATH"); env && *env)
		candidates.push_back(env);
	else {
		std::string dir = exe_dir();
		if (!dir.empty()) {
			candidates.push_back(dir + "/../lib/" + shim_file);
#ifdef SOCKBUF_SHIM_REL_LIBDIR
			candidates.push_back(dir + "/../" SOCKBUF_SHIM_REL_LIBDIR "/" + shim_file);
#endif
		}
#ifdef SOCKBUF_SHIM_INSTALL_LIBDIR
		candidates.push_back(std::string(SOCKBUF_SHIM_INSTALL_LIBDIR "/") + shim_file);
#endif
	}
	for (const auto &c : candidates)
		if (auto found = canonical_if_exists(c); !found.empty())
			return found;
	fmt::print(stderr, "sockbuf run: cannot find {}; looked in:\n", shim_file);
	for (const auto &c : candidates)
		fmt::print(stderr, "  {}\n", c);
	return {};
}

} // namespace

int cmd_run(int argc, char **argv)
{
	const char *policy = nullptr, *extra = nullptr, *log = nullptr, *shim = nullptr,
		   *guard = nullptr;
	bool reserve = false;
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!std::strcmp(a, "--")) {
			i++;
			break;
		}
		if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help"))
			return run_usage(stdout, 0);
		if (!std::strcmp(a, "--reserve")) {
			reserve = true;
			continue;
		}
		const char **slot = !std::strcmp(a, "--policy")	       ? &policy
				    : !std::strcmp(a, "--config")      ? &extra
				    : !std::strcmp(a, "--log")	       ? &log
				    : !std::strcmp(a, "--shim")	       ? &shim
				    : !std::strcmp(a, "--floor-guard") ? &guard
								       : nullptr;
		if (!slot) {
			if (a[0] == '-')
				return run_usage(stderr, 2);
			break; // the command itself, without "--"
		}
		if (i + 1 >= argc)
			return run_usage(stderr, 2);
		*slot = argv[++i];
	}
	if (i >= argc)
		return run_usage(stderr, 2);

	std::string config = fmt::format("policy:{}", policy ? policy : "initial");
	if (extra && *extra)
		config += fmt::format(",{}", extra);
	if (log)
		config += fmt::format(",log:{}", log);
	if (guard)
		config += fmt::format(",guard:{}", guard);
	if (reserve)
		config += ",reserve:on";
#ifdef SOCKBUF_RUN_CHECKS_CONFIG
	// Fail here, loudly, instead of starting the program with a shim that
	// warns once and stays inactive.
	shim::config parsed;
	char err[256];
	if (!shim::parse(config.data(), config.size(), &parsed, err, sizeof(err))) {
		fmt::print(stderr, "sockbuf run: bad configuration: {}\n", err);
		return 2;
	}
#endif
	std::string path = find_shim(shim);
	if (path.empty())
		return 127;

	std::string preload = path;
	if (const char *old = std::getenv("LD_PRELOAD"); old && *old)
		preload += fmt::format(":{}", old);
	if (setenv("LD_PRELOAD", preload.c_str(), 1) != 0 ||
	    setenv("SOCKBUF_SHIM", config.c_str(), 1) != 0) {
		fmt::print(stderr, "sockbuf run: setenv: {}\n", std::strerror(errno));
		return 127;
	}
	execvp(argv[i], argv + i);
	int err_no = errno;
	fmt::print(stderr, "sockbuf run: {}: {}\n", argv[i], std::strerror(err_no));
	return err_no == ENOENT ? 127 : 126;
}

} // namespace sockbuf::cli
