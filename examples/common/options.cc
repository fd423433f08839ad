// SPDX-License-Identifier: MIT
#include "options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace examples
{

options::options(int argc, char **argv, const std::vector<std::string> &allowed)
{
	for (int i = 1; i < argc; i++) {
		std::string arg = argv[i];
		if (arg.rfind("--", 0) != 0)
			throw usage_error("unexpected argument '" + arg + "'");
		std::string key = arg.substr(2);
		std::string value;
		auto eq = key.find('=');
		if (eq != std::string::npos) {
			value = key.substr(eq + 1);
			key = key.substr(0, eq);
		}
		if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
			throw usage_error("unknown option '--" + key + "'");
		if (values_.count(key))
			throw usage_error("option '--" + key + "' given twice");
		values_[key] = value;
	}
}

std::string options::str(const std::string &key, const std::string &fallback) const
{
	auto it = values_.find(key);
	return it == values_.end() ? fallback : it->second;
}

uint64_t parse_size(const std::string &text)
{
	if (text.empty())
		throw usage_error("empty size");
	errno = 0;
	char *end = nullptr;
	unsigned long long v = std::strtoull(text.c_str(), &end, 10);
	if (errno || end == text.c_str() || text[0] == '-')
		throw usage_error("bad size '" + text + "'");
	std::string suffix = end;
	uint64_t mul = 1;
	if (suffix == "K" || suffix == "k")
		mul = 1024;
	else if (suffix == "M" || suffix == "m")
		mul = 1024 * 1024;
	else if (suffix == "G" || suffix == "g")
		mul = 1024ull * 1024 * 1024;
	else if (!suffix.empty())
		throw usage_error("bad size suffix in '" + text + "' (use K, M or G)");
	if (v > UINT64_MAX / mul)
		throw usage_error("size '" + text + "' too large");
	return v * mul;
}

uint64_t options::size(const std::string &key, uint64_t fallback, uint64_t min, uint64_t max) const
{
	if (!has(key))
		return fallback;
	uint64_t v = parse_size(str(key, ""));
	if (v < min || v > max)
		throw usage_error("--" + key + "=" + str(key, "") + " out of range [" +
				  std::to_string(min) + ", " + std::to_string(max) + "]");
	return v;
}

long options::num(const std::string &key, long fallback, long min, long max) const
{
	if (!has(key))
		return fallback;
	std::string text = str(key, "");
	errno = 0;
	char *end = nullptr;
	long v = std::strtol(text.c_str(), &end, 10);
	if (errno || text.empty() || *end)
		throw usage_error("--" + key + ": bad number '" + text + "'");
	if (v < min || v > max)
		throw usage_error("--" + key + "=" + text + " out of range [" +
				  std::to_string(min) + ", " + std::to_string(max) + "]");
	return v;
}

double options::seconds(const std::string &key, double fallback, double min, double max) const
{
	if (!has(key))
		return fallback;
	std::string text = str(key, "");
	char *end = nullptr;
	double v = std::strtod(text.c_str(), &end);
	if (text.empty() || *end || !std::isfinite(v))
		throw usage_error("--" + key + ": bad duration '" + text + "'");
	if (v < min || v > max)
		throw usage_error("--" + key + "=" + text + " out of range");
	return v;
}

bufs_mode parse_bufs(const std::string &text)
{
	if (text == "default")
		return bufs_mode::kernel_default;
	if (text == "initial")
		return bufs_mode::initial;
	if (text == "lock")
		return bufs_mode::lock;
	if (text == "raw")
		return bufs_mode::raw;
	throw usage_error("--bufs must be default, initial, lock or raw, not '" + text + "'");
}

const char *bufs_name(bufs_mode m)
{
	switch (m) {
	case bufs_mode::initial:
		return "initial";
	case bufs_mode::lock:
		return "lock";
	case bufs_mode::raw:
		return "raw";
	default:
		return "default";
	}
}

endpoint parse_endpoint(const std::string &text)
{
	auto colon = text.rfind(':');
	if (colon == std::string::npos || colon == 0)
		throw usage_error("address '" + text + "' is not ADDR:PORT");
	std::string port = text.substr(colon + 1);
	char *end = nullptr;
	long p = std::strtol(port.c_str(), &end, 10);
	if (port.empty() || *end || p < 0 || p > 65535)
		throw usage_error("bad port in '" + text + "'");
	return endpoint{text.substr(0, colon), static_cast<uint16_t>(p)};
}

int run_main(int argc, char **argv, const char *prog, const char *usage,
	     const std::vector<std::string> &allowed, int (*run)(const options &))
{
	try {
		options o(argc, argv, allowed);
		if (o.has("help")) {
			std::fputs(usage, stdout);
			return 0;
		}
		return run(o);
	} catch (const usage_error &e) {
		std::fprintf(stderr, "%s: %s\n%s", prog, e.what(), usage);
		return 2;
	} catch (const std::exception &e) {
		std::fprintf(stderr, "%s: %s\n", prog, e.what());
		return 1;
	}
}

} // namespace examples
