// SPDX-License-Identifier: MIT
// Where sockbuf-contract's results go: --format ktap,junit:PATH,... names
// formats, each to its own file or (one of them) to standard output.
#pragma once

#include "report_cases.h"

#include <string>
#include <vector>

namespace sockbuf::contract
{

struct output_target {
	std::string format; // table, markdown, json, ktap, junit
	std::string path;   // empty: standard output
};

// Appends the targets of "FMT[:PATH],..." to @out; false with @err set on
// an unknown format or a second target on standard output.
bool parse_formats(const std::string &list, std::vector<output_target> *out, std::string *err);

bool has_stdout_target(const std::vector<output_target> &targets);

// The whole document in one format.
std::string render(const json &doc, const std::string &format, const ci_options &opt);

// Writes every target; false (after a message on stderr) if a file could
// not be written.
bool write_outputs(const json &doc, const std::vector<output_target> &targets,
		   const ci_options &opt);

// The exit status a document stands for: 0 every binding verdict held,
// 1 one failed, 77 no scenario ran.
int exit_status_of(const json &doc, const ci_options &opt);

} // namespace sockbuf::contract
