// SPDX-License-Identifier: MIT
// Configuration parser.  No allocation, no locale, no libc state: plain
// loops over the bytes, because it runs inside arbitrary host programs and
// libFuzzer feeds it garbage.
#include "config.h"

#include <sockbuf/sockbuf.h>

#include <cstdio>
#include <cstring>
#include <string_view>

namespace sockbuf::shim
{

namespace
{

using sv = std::string_view;

struct named_policy {
	sv name;
	policy pol;
};
constexpr named_policy policies[] = {
    {"passthrough", policy::passthrough},
    {"initial", policy::initial},
    {"lock", policy::lock},
};

constexpr sv role_names[role_count] = {"any", "listener", "connecting", "accepted"};

bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

sv trim(sv s)
{
	while (!s.empty() && is_space(s.front()))
		s.remove_prefix(1);
	while (!s.empty() && is_space(s.back()))
		s.remove_suffix(1);
	return s;
}

// Decimal digits only, no sign, no overflow past @max.
bool parse_uint(sv s, long long max, long long *out)
{
	if (s.empty() || s.size() > 19)
		return false;
	long long v = 0;
	for (char c : s) {
		if (c < '0' || c > '9')
			return false;
		v = v * 10 + (c - '0');
		if (v > max)
			return false;
	}
	*out = v;
	return true;
}

// "262144", "256K", "1M", "1G" (powers of 1024, either case).
bool parse_size(sv s, int *out)
{
	long long mult = 1;
	if (!s.empty()) {
		switch (s.back()) {
		case 'k':
		case 'K':
			mult = 1024;
			break;
		case 'm':
		case 'M':
			mult = 1024 * 1024;
			break;
		case 'g':
		case 'G':
			mult = 1024 * 1024 * 1024;
			break;
		default:
			break;
		}
		if (mult != 1)
			s.remove_suffix(1);
	}
	long long v = 0;
	if (!parse_uint(s, SOCKBUF_SIZE_MAX, &v))
		return false;
	v *= mult;
	if (v < 1 || v > SOCKBUF_SIZE_MAX)
		return false;
	*out = int(v);
	return true;
}

bool parse_policy(sv s, policy *out)
{
	for (const auto &p : policies)
		if (s == p.name) {
			*out = p.pol;
			return true;
		}
	return false;
}

int find_role(sv s)
{
	for (int r = role_listener; r < role_count; r++)
		if (s == role_names[r])
			return r;
	return -1;
}

int find_dir(sv s)
{
	if (s == "snd")
		return dir_snd;
	if (s == "rcv")
		return dir_rcv;
	return -1;
}

class parser
{
public:
	parser(config *cfg, char *err, size_t errlen) : cfg_(cfg), err_(err), errlen_(errlen) {}

	bool item(sv text, int index)
	{
		text_ = text;
		index_ = index;
		size_t colon = text.find(':');
		if (colon == sv::npos)
			return fail("expected KEY:VALUE");
		sv key = trim(text.substr(0, colon));
		sv value = trim(text.substr(colon + 1));
		if (key.empty())
			return fail("empty key");
		if (value.empty())
			return fail("empty value");
		return dispatch(key, value);
	}

private:
	bool dispatch(sv key, sv value)
	{
		if (key == "policy")
			return set_policy(value, &cfg_->global);
		if (key == "default_snd")
			return set_size(value, &cfg_->size[role_any][dir_snd]);
		if (key == "default_rcv")
			return set_size(value, &cfg_->size[role_any][dir_rcv]);
		if (key == "force")
			return set_choice(value, "allow", "deny", &cfg_->allow_force);
		if (key == "exec")
			return set_choice(value, "drop", "inherit", &cfg_->exec_drop);
		if (key == "reserve")
			return set_choice(value, "on", "off", &cfg_->reserve);
		if (key == "log")
			return set_log(value);
		if (key == "log_rate")
			return set_log_rate(value);
		if (key == "guard")
			return set_guard(value);
		if (key == "guard_events")
			return set_choice(value, "on", "off", &cfg_->guard_events,
					  "guard_events must be on or off");
		if (key == "guard_bpf")
			return set_choice(value, "on", "off", &cfg_->guard_bpf,
					  "guard_bpf must be on or off");
		if (key == "guard_daemon")
			return set_choice(value, "on", "off", &cfg_->guard_daemon,
					  "guard_daemon must be on or off");
		if (key.substr(0, 5) == "port=")
			return set_port(key.substr(5), value);
		size_t dot = key.find('.');
		int r = find_role(key.substr(0, dot));
		if (r < 0)
			return fail("unknown key");
		if (dot == sv::npos)
			return set_policy(value, &cfg_->by_role[r]);
		int d = find_dir(key.substr(dot + 1));
		if (d < 0)
			return fail("unknown direction (snd or rcv)");
		return set_size(value, &cfg_->size[r][d]);
	}

	bool set_policy(sv value, policy *out)
	{
		if (!parse_policy(value, out))
			return fail("unknown policy (passthrough, initial or lock)");
		return true;
	}

	bool set_size(sv value, int *out)
	{
		if (!parse_size(value, out))
			return fail("size must be 1 to 1073741823 bytes, digits with an "
				    "optional K, M or G");
		return true;
	}

	bool set_choice(sv value, sv yes, sv no, bool *out, const char *why = "unknown value")
	{
		if (value == yes)
			*out = true;
		else if (value == no)
			*out = false;
		else
			return fail(why);
		return true;
	}

	bool set_port(sv port_text, sv value)
	{
		long long port = 0;
		if (!parse_uint(port_text, 65535, &port) || port == 0)
			return fail("port must be 1 to 65535");
		policy p = policy::unset;
		if (!set_policy(value, &p))
			return false;
		for (int i = 0; i < cfg_->nports; i++)
			if (cfg_->ports[i].port == port) {
				cfg_->ports[i].pol = p; // later items win
				return true;
			}
		if (cfg_->nports == max_port_rules)
			return fail("too many port rules (16 at most)");
		cfg_->ports[cfg_->nports++] = {uint16_t(port), p};
		return true;
	}

	bool set_log(sv value)
	{
		long long fd = 0;
		if (value == "off") {
			cfg_->log = log_target::none;
		} else if (value == "stderr") {
			cfg_->log = log_target::to_stderr;
		} else if (value.substr(0, 3) == "fd=") {
			if (!parse_uint(value.substr(3), 1 << 20, &fd))
				return fail("log fd must be a number");
			cfg_->log = log_target::to_fd;
			cfg_->log_fd = int(fd);
		} else if (value.front() == '/') {
			if (value.size() >= sizeof(cfg_->log_path))
				return fail("log path too long (255 bytes at most)");
			if (value.find('\0') != sv::npos)
				return fail("log path contains a NUL byte");
			std::memcpy(cfg_->log_path, value.data(), value.size());
			cfg_->log_path[value.size()] = '\0';
			cfg_->log = log_target::to_file;
		} else {
			return fail("log must be off, stderr, fd=N or an absolute path");
		}
		return true;
	}

	bool set_guard(sv value)
	{
		long long ms = 0;
		if (value == "off") {
			cfg_->guard_ms = 0;
			return true;
		}
		if (!parse_uint(value, 60000, &ms) || ms == 0)
			return fail("guard must be off or 1 to 60000 milliseconds");
		cfg_->guard_ms = int(ms);
		return true;
	}

	bool set_log_rate(sv value)
	{
		long long rate = 0;
		if (!parse_uint(value, 1000000, &rate) || rate == 0)
			return fail("log_rate must be 1 to 1000000 lines per second");
		cfg_->log_rate = int(rate);
		return true;
	}

	bool fail(const char *why)
	{
		if (errlen_ == 0)
			return false;
		// Show the item, cut short and with control bytes replaced, so
		// the warning stays one readable line.
		char shown[41];
		size_t n = text_.size() < sizeof(shown) - 1 ? text_.size() : sizeof(shown) - 1;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = static_cast<unsigned char>(text_[i]);
			shown[i] = (c < 0x20 || c >= 0x7f) ? '?' : char(c);
		}
		shown[n] = '\0';
		std::snprintf(err_, errlen_, "item %d '%s%s': %s", index_, shown,
			      text_.size() > n ? "..." : "", why);
		return false;
	}

	config *cfg_;
	char *err_;
	size_t errlen_;
	sv text_;
	int index_ = 0;
};

} // namespace

bool parse(const char *text, size_t len, config *cfg, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	if (!text || !cfg)
		return false;
	parser p(cfg, err, errlen);
	sv lines(text, len);
	int index = 0;
	while (!lines.empty()) {
		size_t nl = lines.find('\n');
		sv line = lines.substr(0, nl);
		lines = nl == sv::npos ? sv() : lines.substr(nl + 1);
		line = line.substr(0, line.find('#')); // a comment runs to the line's end
		while (true) {
			size_t comma = line.find(',');
			sv item = trim(line.substr(0, comma));
			index++;
			if (!item.empty() && !p.item(item, index))
				return false;
			if (comma == sv::npos)
				break;
			line = line.substr(comma + 1);
		}
	}
	return true;
}

bool needs_socket_events(const config &cfg)
{
	if (cfg.nports > 0 || cfg.reserve)
		return true;
	for (int r = 0; r < role_count; r++)
		if (cfg.by_role[r] != policy::unset || cfg.size[r][dir_snd] || cfg.size[r][dir_rcv])
			return true;
	return false;
}

policy resolve(const config &cfg, role r, uint16_t port)
{
	if (port)
		for (int i = 0; i < cfg.nports; i++)
			if (cfg.ports[i].port == port)
				return cfg.ports[i].pol;
	if (r != role_any && cfg.by_role[r] != policy::unset)
		return cfg.by_role[r];
	return cfg.global;
}

int default_size(const config &cfg, role r, dir d)
{
	if (cfg.size[r][d])
		return cfg.size[r][d];
	return cfg.size[role_any][d];
}

const char *policy_name(policy p)
{
	for (const auto &n : policies)
		if (n.pol == p)
			return n.name.data();
	return "unset";
}

const char *role_name(role r)
{
	return r < role_count ? role_names[r].data() : "?";
}

} // namespace sockbuf::shim
