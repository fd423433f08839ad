// SPDX-License-Identifier: MIT
// Why SO_RESERVE_MEM is or is not usable: the process's memory cgroup, read
// from /proc and its files.
#include "cgroup.h"

#include "read_file.h"

#include <sockbuf/sockbuf.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace sockbuf::cgroup
{

namespace
{

using sv = std::string_view;

// The next @sep-separated field of @s, removed from it.
sv next_field(sv *s, char sep)
{
	size_t at = s->find(sep);
	sv field = s->substr(0, at);
	*s = at == sv::npos ? sv() : s->substr(at + 1);
	return field;
}

bool has_word(sv list, char sep, sv word)
{
	while (!list.empty())
		if (next_field(&list, sep) == word)
			return true;
	return false;
}

bool copy(sv from, char *to, size_t len)
{
	if (from.size() >= len) {
		to[0] = '\0';
		return false;
	}
	std::memcpy(to, from.data(), from.size());
	to[from.size()] = '\0';
	return true;
}

template <typename Fn> void each_line(sv text, Fn fn)
{
	while (!text.empty()) {
		sv line = next_field(&text, '\n');
		if (!line.empty())
			fn(line);
	}
}

// "hierarchy-id:controllers:path"
void cgroup_line(sv line, membership *out)
{
	sv id = next_field(&line, ':');
	sv controllers = next_field(&line, ':');
	sv path = line;
	if (id.empty() || path.empty() || path.front() != '/')
		return;
	if (id == "0" && controllers.empty())
		out->v2 = copy(path, out->v2_path, sizeof(out->v2_path));
	else if (has_word(controllers, ',', "memory"))
		out->v1_memory = copy(path, out->v1_path, sizeof(out->v1_path));
}

// "id parent maj:min root mountpoint options [optional...] - fstype source superopts"
void mountinfo_line(sv line, mounts *out)
{
	size_t dash = line.find(" - ");
	if (dash == sv::npos)
		return;
	sv head = line.substr(0, dash);
	sv tail = line.substr(dash + 3);
	sv fields[5];
	for (auto &f : fields)
		f = next_field(&head, ' ');
	const sv root = fields[3], point = fields[4];
	const sv fstype = next_field(&tail, ' ');
	next_field(&tail, ' '); // source
	const sv superopts = tail;
	if (fstype == "cgroup2" && !out->v2[0])
		copy(point, out->v2, sizeof(out->v2));
	else if (fstype == "cgroup" && has_word(superopts, ',', "memory") && !out->v1_memory[0] &&
		 copy(point, out->v1_memory, sizeof(out->v1_memory)) &&
		 !copy(root, out->v1_memory_root, sizeof(out->v1_memory_root)))
		out->v1_memory[0] = '\0';
}

void cmdline_word(sv word, bool *nosocket)
{
	constexpr sv key = "cgroup.memory=";
	if (word.substr(0, key.size()) == key && has_word(word.substr(key.size()), ',', "nosocket"))
		*nosocket = true;
}

// Streams @path line by line through a fixed buffer; a line longer than the
// buffer is skipped.  Returns false when the file cannot be opened.
template <typename Fn> bool read_lines(const char *path, Fn fn)
{
	int fd = ::open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	char buf[4096];
	size_t have = 0;
	bool skipping = false;
	for (;;) {
		ssize_t n = fileio::read_all(fd, buf + have, sizeof(buf) - have);
		if (n <= 0)
			break;
		have += size_t(n);
		size_t start = 0;
		for (size_t i = 0; i < have; i++) {
			if (buf[i] != '\n')
				continue;
			if (!skipping)
				fn(sv(buf + start, i - start));
			skipping = false;
			start = i + 1;
		}
		std::memmove(buf, buf + start, have - start);
		have -= start;
		if (have == sizeof(buf)) { // a line longer than the buffer
			have = 0;
			skipping = true;
		}
	}
	if (have && !skipping)
		fn(sv(buf, have));
	::close(fd);
	return true;
}

// The cgroup's directory: mount point + path below the mount's root.
bool join(const char *mnt, const char *mnt_root, const char *path, char *buf, size_t len)
{
	sv p(path), root(mnt_root);
	if (root.size() > 1) {
		if (p.substr(0, root.size()) != root)
			return false; // the cgroup is outside what this mount shows
		p.remove_prefix(root.size());
	}
	if (p == "/")
		p = sv();
	int n = std::snprintf(buf, len, "%s%.*s", mnt, int(p.size()), p.data());
	return n > 0 && size_t(n) < len;
}

} // namespace

void parse_proc_cgroup(std::string_view text, membership *out)
{
	each_line(text, [out](sv line) { cgroup_line(line, out); });
}

void parse_mountinfo(std::string_view text, mounts *out)
{
	each_line(text, [out](sv line) { mountinfo_line(line, out); });
}

bool cmdline_nosocket(std::string_view cmdline)
{
	bool nosocket = false;
	// Words end at spaces; "--" ends the kernel's own parameters.
	while (!cmdline.empty()) {
		size_t end = cmdline.find_first_of(" \t\n");
		sv word = cmdline.substr(0, end);
		cmdline = end == sv::npos ? sv() : cmdline.substr(end + 1);
		if (word == "--")
			break;
		cmdline_word(word, &nosocket);
	}
	return nosocket;
}

bool controllers_have_memory(std::string_view text)
{
	while (!text.empty()) {
		size_t end = text.find_first_of(" \t\n");
		if (text.substr(0, end) == "memory")
			return true;
		text = end == sv::npos ? sv() : text.substr(end + 1);
	}
	return false;
}

int explain(int reserve_ret, const facts &f)
{
	if (reserve_ret == 0)
		return SOCKBUF_RESERVE_USABLE;
	if (reserve_ret == -ENOPROTOOPT)
		return SOCKBUF_RESERVE_NO_OPTION;
	if (reserve_ret != -EOPNOTSUPP)
		return SOCKBUF_RESERVE_UNKNOWN;
	// The memory controller on a v1 hierarchy takes precedence: the
	// kernel then charges sockets only where v1 TCP accounting is on
	// (writing memory.kmem.tcp.limit_in_bytes switches it on whatever
	// cgroup.memory=nosocket says).
	if (f.member.v1_memory) {
		if (sv(f.member.v1_path) == "/")
			return SOCKBUF_RESERVE_ROOT_CGROUP;
		return SOCKBUF_RESERVE_V1_NO_TCP_ACCOUNTING;
	}
	if (f.nosocket)
		return SOCKBUF_RESERVE_NOSOCKET;
	if (f.member.v2) {
		if (sv(f.member.v2_path) == "/")
			return SOCKBUF_RESERVE_ROOT_CGROUP;
		if (f.v2_memory == 0)
			return SOCKBUF_RESERVE_NO_MEMORY_CONTROLLER;
	}
	return SOCKBUF_RESERVE_UNKNOWN;
}

void read_system(facts *out)
{
	*out = facts{};
	read_lines("/proc/self/cgroup", [out](sv line) { cgroup_line(line, &out->member); });
	read_lines("/proc/self/mountinfo", [out](sv line) { mountinfo_line(line, &out->mnt); });
	read_lines("/proc/cmdline", [out](sv line) {
		if (cmdline_nosocket(line))
			out->nosocket = true;
	});
	char dir[max_path + 32];
	if (out->member.v2 && out->mnt.v2[0] &&
	    join(out->mnt.v2, "/", out->member.v2_path, dir, sizeof(dir) - 20)) {
		std::strcat(dir, "/cgroup.controllers");
		int found = -1;
		if (read_lines(dir, [&found](sv line) {
			    if (controllers_have_memory(line))
				    found = 1;
			    else if (found < 0)
				    found = 0;
		    }))
			out->v2_memory = found < 0 ? 0 : found; // an empty file: none
	}
}

bool memory_cgroup_dir(const facts &f, char *buf, size_t len)
{
	if (f.member.v1_memory && f.mnt.v1_memory[0])
		return join(f.mnt.v1_memory, f.mnt.v1_memory_root, f.member.v1_path, buf, len);
	if (f.member.v2 && f.mnt.v2[0])
		return join(f.mnt.v2, "/", f.member.v2_path, buf, len);
	return false;
}

} // namespace sockbuf::cgroup
