// SPDX-License-Identifier: MIT
#include "show_check.h"

#include "show_diagnose.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace sockbuf::cli::show
{

namespace
{

std::string read_all(const std::string &path)
{
	std::ifstream f(path, std::ios::binary);
	return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int parent_of(int pid)
{
	// Field 4 of /proc/PID/stat, after the command name's closing ')'.
	const std::string st = read_all(fmt::format("/proc/{}/stat", pid));
	const size_t close = st.rfind(')');
	int ppid = 0;
	char state = 0;
	if (close == std::string::npos ||
	    std::sscanf(st.c_str() + close + 1, " %c %d", &state, &ppid) != 2)
		return 0;
	return ppid;
}

std::vector<std::string> split(const std::string &s, char sep)
{
	std::vector<std::string> out;
	size_t start = 0;
	for (;;) {
		const size_t end = s.find(sep, start);
		out.push_back(s.substr(start, end == std::string::npos ? end : end - start));
		if (end == std::string::npos)
			return out;
		start = end + 1;
	}
}

// The "ReceiveBuffer=..." and "SendBuffer=..." lines of one unit file.
void buffer_lines(const std::string &path, std::vector<std::string> *out)
{
	std::ifstream f(path);
	std::string line;
	while (std::getline(f, line)) {
		const size_t at = line.find_first_not_of(" \t");
		if (at == std::string::npos)
			continue;
		const std::string l = line.substr(at);
		if (l.rfind("ReceiveBuffer=", 0) == 0 || l.rfind("SendBuffer=", 0) == 0)
			out->push_back(l);
	}
}

} // namespace

systemd_passed parse_systemd_passed(int pid, int ppid, const std::string &environ,
				    const std::string &cgroup)
{
	systemd_passed out;
	long listen_pid = -1, listen_fds = 0;
	std::vector<std::string> names;
	bool have_names = false;
	for (const auto &var : split(environ, '\0')) {
		const char *v = var.c_str();
		if (var.rfind("LISTEN_PID=", 0) == 0)
			listen_pid = std::strtol(v + 11, nullptr, 10);
		else if (var.rfind("LISTEN_FDS=", 0) == 0)
			listen_fds = std::strtol(v + 11, nullptr, 10);
		else if (var.rfind("LISTEN_FDNAMES=", 0) == 0) {
			names = split(var.substr(15), ':');
			have_names = true;
		}
	}
	// LISTEN_PID is the process systemd started: a worker it forked
	// holds the same fds at the same numbers.
	if (listen_fds <= 0 || listen_fds > 4096 || (listen_pid != pid && listen_pid != ppid))
		return out;
	// "0::/system.slice/nginx.service" (v2) or "1:name=systemd:/..." (v1).
	for (const auto &line : split(cgroup, '\n')) {
		const size_t colon = line.find(':', line.find(':') + 1);
		if (colon == std::string::npos)
			continue;
		const std::string path = line.substr(colon + 1);
		for (const auto &part : split(path, '/'))
			if (part.size() > 8 && part.compare(part.size() - 8, 8, ".service") == 0)
				out.service = part;
		if (!out.service.empty())
			break;
	}
	for (long i = 0; i < listen_fds; i++) {
		std::string unit;
		if (have_names && size_t(i) < names.size() && !names[size_t(i)].empty() &&
		    names[size_t(i)] != "unknown")
			unit = names[size_t(i)];
		else if (!out.service.empty())
			unit = out.service.substr(0, out.service.size() - 8) + ".socket";
		else
			unit = "a socket unit";
		out.fd_unit[int(3 + i)] = unit;
	}
	return out;
}

systemd_passed read_systemd_passed(int pid)
{
	return parse_systemd_passed(pid, parent_of(pid),
				    read_all(fmt::format("/proc/{}/environ", pid)),
				    read_all(fmt::format("/proc/{}/cgroup", pid)));
}

std::string unit_buffer_settings(const std::string &unit)
{
	if (unit.find('/') != std::string::npos || unit.find(".socket") == std::string::npos)
		return {};
	// systemd's search order: the first directory holding the unit
	// wins, drop-ins of every directory apply.
	static const char *const dirs[] = {"/etc/systemd/system", "/run/systemd/system",
					   "/usr/local/lib/systemd/system",
					   "/usr/lib/systemd/system", "/lib/systemd/system"};
	std::vector<std::string> lines;
	for (const char *d : dirs) {
		const std::string path = fmt::format("{}/{}", d, unit);
		if (std::ifstream(path).good()) {
			buffer_lines(path, &lines);
			break;
		}
	}
	std::set<std::string> dropins; // by name, in order: later ones win
	for (const char *d : dirs) {
		const std::string dir = fmt::format("{}/{}.d", d, unit);
		if (DIR *dd = opendir(dir.c_str())) {
			while (dirent *e = readdir(dd)) {
				const std::string n = e->d_name;
				if (n.size() > 5 && n.compare(n.size() - 5, 5, ".conf") == 0)
					dropins.insert(fmt::format("{}/{}", dir, n));
			}
			closedir(dd);
		}
	}
	for (const auto &p : dropins)
		buffer_lines(p, &lines);
	std::string out;
	for (const auto &l : lines)
		out += (out.empty() ? "" : ", ") + l;
	return out;
}

void name_systemd_units(collection *c)
{
	std::map<int, systemd_passed> by_pid;
	for (auto &s : c->sockets) {
		auto it = by_pid.find(s.pid);
		if (it == by_pid.end())
			it = by_pid.emplace(s.pid, read_systemd_passed(s.pid)).first;
		auto u = it->second.fd_unit.find(s.fd);
		if (u == it->second.fd_unit.end())
			continue;
		s.systemd_unit = u->second;
		const std::string set = unit_buffer_settings(u->second);
		const int locked = s.lock > 0 ? s.lock : 0;
		if (!locked && set.empty())
			continue;
		const std::string dirs = locked == 3		  ? "both directions"
					 : (locked & SOCKBUF_RCV) ? "the receive buffer"
								  : "the send buffer";
		if (locked && !set.empty())
			s.systemd_note = fmt::format(
			    "passed by systemd from {} ({}), which locked {}: remove {} "
			    "from the unit and restart it; 'sockbuf fix {}' unlocks it now",
			    u->second, set, dirs, set, s.pid);
		else if (locked)
			s.systemd_note = fmt::format(
			    "passed by systemd from {}{}: a ReceiveBuffer= or SendBuffer= there "
			    "(not in the unit files found) would lock {} as seen; 'sockbuf fix "
			    "{}' unlocks it now",
			    u->second,
			    it->second.service.empty()
				? ""
				: fmt::format(" (for {})", it->second.service),
			    dirs, s.pid);
		else
			s.systemd_note = fmt::format(
			    "passed by systemd from {} ({}); not locked now", u->second, set);
	}
}

bool print_check(const collection &c)
{
	bool any = false;
	for (const auto &s : c.sockets) {
		std::string what;
		if (s.lock > 0)
			what += fmt::format(" locked {}{}{}", (s.lock & SOCKBUF_SND) ? "snd" : "",
					    s.lock == 3 ? "+" : "",
					    (s.lock & SOCKBUF_RCV) ? "rcv" : "");
		for (int dir : {SOCKBUF_SND, SOCKBUF_RCV})
			if (const int depth = floor_depth(s, dir))
				what += fmt::format(" {} below its floor {} by {}",
						    dir == SOCKBUF_SND ? "snd" : "rcv",
						    dir == SOCKBUF_SND ? s.floor_snd : s.floor_rcv,
						    depth);
		if (what.empty())
			continue;
		any = true;
		fmt::print("pid {} fd {} {} {} -> {}:{}{}\n", s.pid, s.fd,
			   diag::state_name(s.info.state), s.info.local.str(), s.info.remote.str(),
			   what,
			   s.systemd_unit.empty() ? "" : fmt::format(" ({})", s.systemd_unit));
	}
	return any;
}

} // namespace sockbuf::cli::show
