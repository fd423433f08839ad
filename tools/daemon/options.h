// SPDX-License-Identifier: MIT
// sockbufd's command line.
#pragma once

#include <string>

namespace sockbuf::daemon
{

struct options {
	std::string metrics_file;     // node_exporter textfile, written atomically
	std::string metrics_listen;   // ADDR:PORT of the Prometheus endpoint
	unsigned interval_ms = 100;   // a pass over the guarded sockets
	unsigned net_ms = 60000;      // every table read whole, whatever its header says
	unsigned reread_ms = 100;     // a table read again at most this often
	bool events = true;	      // one BPF program set for the host, where it loads
	unsigned max_services = 1000; // services with series of their own
};

// Parses argv into @out.  0: run; 1: done (--help, --version printed);
// 2: a bad option or value, named on standard error.
int parse_options(int argc, char **argv, options *out);

} // namespace sockbuf::daemon
