// SPDX-License-Identifier: MIT
// Subcommands of the `sockbuf` tool.  Each returns the process exit status.
#pragma once

namespace sockbuf::cli
{

int cmd_probe(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_fix(int argc, char **argv);

} // namespace sockbuf::cli
