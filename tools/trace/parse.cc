// SPDX-License-Identifier: MIT
// Parsing what tracefs prints: `format` files and lines of `trace`.
#include "trace.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace sockbuf::trace
{

bool event_format::has(const std::string &field) const
{
	for (const auto &f : fields)
		if (f == field)
			return true;
	return false;
}

namespace
{

std::string trim(const std::string &s)
{
	size_t b = s.find_first_not_of(" \t");
	if (b == std::string::npos)
		return "";
	size_t e = s.find_last_not_of(" \t\r");
	return s.substr(b, e - b + 1);
}

// "field:unsigned int foo[3];	offset:..." -> "foo"
std::string field_name(const std::string &decl)
{
	std::string d = trim(decl);
	size_t br = d.find('[');
	if (br != std::string::npos)
		d = d.substr(0, br);
	size_t sp = d.find_last_of(" *");
	return trim(sp == std::string::npos ? d : d.substr(sp + 1));
}

bool all_digits(const std::string &s, size_t b, size_t e)
{
	if (b >= e)
		return false;
	for (size_t i = b; i < e; i++)
		if (!isdigit(static_cast<unsigned char>(s[i])))
			return false;
	return true;
}

int64_t parse_stamp(const std::string &tok)
{
	size_t dot = tok.find('.');
	int64_t sec = std::strtoll(tok.substr(0, dot).c_str(), nullptr, 10);
	std::string frac = tok.substr(dot + 1);
	frac.resize(9, '0');
	return sec * 1000000000 + std::strtoll(frac.c_str(), nullptr, 10);
}

int port_of(const std::map<std::string, std::string> &f, const char *key, bool net_order)
{
	auto it = f.find(key);
	if (it == f.end())
		return -1;
	char *end = nullptr;
	unsigned long v = std::strtoul(it->second.c_str(), &end, 0);
	if (end == it->second.c_str() || v > 0xffff)
		return -1;
	return net_order ? ntohs(static_cast<uint16_t>(v)) : int(v);
}

// The socket an event names, from whatever fields its kernel printed.
void identify(event *e)
{
	for (const char *k : {"sk", "skaddr"}) {
		auto it = e->fields.find(k);
		if (it != e->fields.end())
			e->sk = std::strtoull(it->second.c_str(), nullptr, 16);
	}
	if (e->fields.count("sport"))
		e->sport = port_of(e->fields, "sport", false);
	if (e->fields.count("dport"))
		e->dport = port_of(e->fields, "dport", false);
	// Our kprobes read struct sock_common: skc_num is host order,
	// skc_dport network order.
	if (e->fields.count("skc_num"))
		e->sport = port_of(e->fields, "skc_num", false);
	if (e->fields.count("skc_dport"))
		e->dport = port_of(e->fields, "skc_dport", true);
}

} // namespace

bool parse_format(const std::string &text, event_format *out)
{
	*out = event_format();
	std::istringstream in(text);
	std::string line;
	bool named = false;
	while (std::getline(in, line)) {
		std::string t = trim(line);
		if (t.rfind("name:", 0) == 0) {
			out->name = trim(t.substr(5));
			named = !out->name.empty();
		} else if (t.rfind("ID:", 0) == 0) {
			out->id = std::atoi(t.substr(3).c_str());
		} else if (t.rfind("field:", 0) == 0) {
			std::string decl = t.substr(6, t.find(';') - 6);
			std::string f = field_name(decl);
			if (!f.empty() && f.rfind("common_", 0) != 0)
				out->fields.push_back(f);
		} else if (t.rfind("print fmt:", 0) == 0) {
			out->print_fmt = trim(t.substr(10));
		}
	}
	return named;
}

std::map<std::string, std::string> parse_fields(const std::string &payload)
{
	std::map<std::string, std::string> out;
	std::istringstream in(payload);
	std::string w;
	while (in >> w) {
		size_t eq = w.find('=');
		size_t colon = w.find(':');
		size_t at = eq != std::string::npos ? eq : colon;
		if (eq != std::string::npos && colon != std::string::npos)
			at = std::min(eq, colon);
		if (at == std::string::npos || at == 0 || w[0] == '(')
			continue;
		out[w.substr(0, at)] = w.substr(at + 1);
	}
	return out;
}

std::optional<event> parse_line(const std::string &line,
				const std::map<std::string, std::string> &names)
{
	if (line.empty() || line[0] == '#')
		return std::nullopt;
	// "  task-PID  [CPU] flags  SEC.USEC: name: payload"; the task's name
	// may hold anything, so find "[digits]" first.
	size_t lb = 0, rb = 0;
	for (size_t i = 0; i < line.size(); i++) {
		if (line[i] != '[')
			continue;
		size_t j = line.find(']', i);
		if (j != std::string::npos && all_digits(line, i + 1, j)) {
			lb = i;
			rb = j;
			break;
		}
	}
	if (rb == 0)
		return std::nullopt;
	event e;
	e.cpu = std::atoi(line.c_str() + lb + 1);
	std::string head = trim(line.substr(0, lb));
	if (!head.empty() && head.back() == ')') // tgid column
		head = trim(head.substr(0, head.rfind('(')));
	size_t dash = head.rfind('-');
	if (dash != std::string::npos && all_digits(head, dash + 1, head.size()))
		e.pid = std::atoi(head.c_str() + dash + 1);
	// The timestamp: the first word after the CPU that is digits.digits:
	std::istringstream rest(line.substr(rb + 1));
	std::string w;
	size_t consumed = rb + 1;
	bool stamped = false;
	for (int k = 0; k < 3 && rest >> w; k++) {
		size_t dot = w.find('.');
		if (w.size() > 1 && w.back() == ':' && dot != std::string::npos &&
		    all_digits(w, 0, dot) && all_digits(w, dot + 1, w.size() - 1)) {
			e.time_ns = parse_stamp(w.substr(0, w.size() - 1));
			consumed = line.find(w, consumed) + w.size();
			stamped = true;
			break;
		}
	}
	if (!stamped)
		return std::nullopt;
	std::string tail = line.substr(consumed);
	size_t b = tail.find_first_not_of(' ');
	size_t colon = tail.find(": ", b);
	std::string printed = trim(b == std::string::npos ? "" : tail.substr(b, colon - b));
	if (!printed.empty() && printed.back() == ':')
		printed.pop_back();
	auto it = names.find(printed);
	if (it == names.end())
		return std::nullopt;
	e.name = it->second;
	if (colon != std::string::npos)
		e.fields = parse_fields(tail.substr(colon + 2));
	identify(&e);
	return e;
}

std::vector<event> parse_trace(const std::string &text,
			       const std::map<std::string, std::string> &names)
{
	std::vector<event> out;
	std::istringstream in(text);
	std::string line;
	while (std::getline(in, line))
		if (auto e = parse_line(line, names))
			out.push_back(std::move(*e));
	return out;
}

} // namespace sockbuf::trace
