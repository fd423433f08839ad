// SPDX-License-Identifier: MIT
// Subcommands of the `sockbuf` tool.  Each returns the process exit status.
#pragma once

#include <string>

namespace sockbuf::cli
{

int cmd_probe(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_fix(int argc, char **argv);

// What a floor guard of this process gets with SOCKBUF_GUARD_EVENTS: the
// programs loaded (and on which functions), or why it polls.  Made and
// destroyed here: loading them is the only sure test (cmd_probe.cc).
struct guard_events {
	int err = -ENOENT;
	std::string attached;
};
guard_events probe_guard_events();

} // namespace sockbuf::cli
