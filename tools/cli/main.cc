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
     "probe [--json]\n"
     "      which buffer mechanisms this kernel offers"},
    {"demo", sockbuf::cli::cmd_demo,
     "demo [--bytes N] [--size N]\n"
     "      untouched vs set_initial vs lock on loopback TCP"},
    {"run", sockbuf::cli::cmd_run,
     "run [--policy P] [--via W] [--floor-guard MS] [--config S] -- CMD ARGS...\n"
     "      run a program with sockbuf's policy (and a guard of its floors)"},
    {"show", sockbuf::cli::cmd_show,
     "show PID...|--all [--json|--check]   show PID --watch MS [--count N]\n"
     "      TCP socket buffers, lock bits, floors, diagnosis; --check for\n"
     "      monitoring, --watch follows the floors"},
    {"fix", sockbuf::cli::cmd_fix,
     "fix PID... [--floor SIZE [--guard]] [--dry-run]\n"
     "      unlock running processes' locked buffers (--guard keeps the floor)"},
};

int usage(std::FILE *to, int status)
{
	fmt::print(to, "usage: sockbuf COMMAND [ARGS] | --version | --help\n\ncommands:\n");
	for (const auto &c : commands)
		fmt::print(to, "  {}\n", c.help);
	fmt::print(to, "\n'sockbuf COMMAND --help' gives a command's options; man sockbuf.\n");
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
	fmt::print(stderr, "sockbuf: unknown command '{}' (sockbuf --help)\n", argv[1]);
	return 2;
}
