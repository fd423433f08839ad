// SPDX-License-Identifier: MIT
// sockbuf - see what the kernel offers and what the library does with it.
#include "commands.h"
#include "version.h"

#include <fmt/core.h>

#include <cstdio>
#include <cstring>

namespace
{

struct command {
	const char *name;
	int (*run)(int, char **);
	const char *help;
};

const command commands[] = {
    {"probe", sockbuf::cli::cmd_probe,
     "probe [--json]   which buffer mechanisms this kernel offers"},
    {"demo", sockbuf::cli::cmd_demo,
     "demo [--bytes N] untouched vs set_initial vs lock on loopback TCP"},
    {"run", sockbuf::cli::cmd_run,
     "run [--policy P] [--via W] -- CMD ARGS...   run a program with sockbuf's policy"},
    {"show", sockbuf::cli::cmd_show,
     "show PID|--all [--json]   a process's TCP socket buffers, lock bits, diagnosis"},
    {"fix", sockbuf::cli::cmd_fix,
     "fix PID [--floor SIZE] [--dry-run]   unlock a running process's locked buffers"},
};

int usage(std::FILE *to, int status)
{
	fmt::print(to, "usage: sockbuf COMMAND [ARGS] | --version | --help\n\ncommands:\n");
	for (const auto &c : commands)
		fmt::print(to, "  {}\n", c.help);
	return status;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr, 2);
	if (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))
		return usage(stdout, 0);
	if (!std::strcmp(argv[1], "--version")) {
		fmt::print("{}\n", sockbuf::release::version_line("sockbuf"));
		return 0;
	}
	for (const auto &c : commands)
		if (!std::strcmp(argv[1], c.name))
			return c.run(argc - 1, argv + 1);
	fmt::print(stderr, "sockbuf: unknown command '{}'\n", argv[1]);
	return usage(stderr, 2);
}
