// SPDX-License-Identifier: MIT
#include "outputs.h"

#include "report_ci.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace sockbuf::contract
{

namespace
{

constexpr std::array<const char *, 5> formats = {"table", "markdown", "json", "ktap", "junit"};

bool write_file(const std::string &path, const std::string &text)
{
	std::ofstream f(path);
	f << text;
	return bool(f);
}

} // namespace

bool parse_formats(const std::string &list, std::vector<output_target> *out, std::string *err)
{
	std::stringstream in(list);
	std::string item;
	while (std::getline(in, item, ',')) {
		if (item.empty())
			continue;
		output_target t;
		size_t colon = item.find(':');
		t.format = item.substr(0, colon);
		if (colon != std::string::npos)
			t.path = item.substr(colon + 1);
		if (std::find(formats.begin(), formats.end(), t.format) == formats.end()) {
			*err = fmt::format(
			    "unknown format '{}' (table, markdown, json, ktap, junit)", t.format);
			return false;
		}
		if (colon != std::string::npos && t.path.empty()) {
			*err = fmt::format("format '{}': empty path", t.format);
			return false;
		}
		if (t.path.empty() && has_stdout_target(*out)) {
			*err = "only one format can go to standard output; give the others a path";
			return false;
		}
		out->push_back(t);
	}
	return true;
}

bool has_stdout_target(const std::vector<output_target> &targets)
{
	return std::any_of(targets.begin(), targets.end(),
			   [](const output_target &t) { return t.path.empty(); });
}

std::string render(const json &doc, const std::string &format, const ci_options &opt)
{
	if (format == "ktap")
		return ktap_report(doc, opt);
	if (format == "junit")
		return junit_report(doc, opt);
	if (format == "json")
		return doc.dump(1) + "\n";
	if (format == "markdown")
		return markdown_report(doc);
	return text_report(doc) + fmt::format("{:.1f} s\n", doc.value("seconds", 0.0));
}

bool write_outputs(const json &doc, const std::vector<output_target> &targets,
		   const ci_options &opt)
{
	bool ok = true;
	for (const auto &t : targets) {
		std::string text = render(doc, t.format, opt);
		if (t.path.empty()) {
			fmt::print("{}", text);
			std::fflush(stdout);
		} else if (!write_file(t.path, text)) {
			fmt::print(stderr, "sockbuf-contract: cannot write {}\n", t.path);
			ok = false;
		}
	}
	return ok;
}

int exit_status_of(const json &doc, const ci_options &opt)
{
	bool ran = false, failed = false;
	for (const auto &s : doc["scenarios"]) {
		if (!s.contains("skip_reason"))
			ran = true;
		for (const auto &v : s["verdicts"]) {
			if (v["library"]["verdict"] == outcome_name(outcome::fail))
				failed = true;
			if (opt.strict_raw && v["raw"]["verdict"] == outcome_name(outcome::fail))
				failed = true;
		}
	}
	if (!ran)
		return 77;
	return failed ? 1 : 0;
}

} // namespace sockbuf::contract
