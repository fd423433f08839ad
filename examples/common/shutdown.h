// SPDX-License-Identifier: MIT
// SIGINT/SIGTERM as a file descriptor, so a server's poll() loop sees them.
// Call before starting any thread: the signals stay blocked in all threads.
#pragma once

namespace examples
{

int block_stop_signals(); // returns a signalfd, throws on failure

} // namespace examples
