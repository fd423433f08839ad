// SPDX-License-Identifier: MIT
#include "run_target.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <vector>

namespace sockbuf::cli::run
{

namespace
{

// A read-only mapping of a whole file.
class mapped_file
{
public:
	explicit mapped_file(const std::string &path)
	{
		int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
			void *p = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
			if (p != MAP_FAILED) {
				data_ = static_cast<const unsigned char *>(p);
				size_ = size_t(st.st_size);
			}
		}
		close(fd);
	}
	~mapped_file()
	{
		if (data_)
			munmap(const_cast<unsigned char *>(data_), size_);
	}
	mapped_file(const mapped_file &) = delete;
	mapped_file &operator=(const mapped_file &) = delete;

	const unsigned char *data() const { return data_; }
	size_t size() const { return size_; }
	// @n bytes at @off lie inside the file.
	bool has(uint64_t off, uint64_t n) const { return off <= size_ && n <= size_ - off; }

private:
	const unsigned char *data_ = nullptr;
	size_t size_ = 0;
};

// What one ELF64 object says about itself (every 64-bit Debian
// architecture; anything else is left unread).
struct elf_facts {
	bool readable = false;	 // an ELF64 object with section headers
	bool interp = false;	 // PT_INTERP: started by ld.so
	bool setsockopt = false; // imports setsockopt
	bool exec = false;	 // imports an exec function: starts other programs
	bool dlopen = false;	 // imports dlopen: loads libraries later
	std::vector<std::string> needed, runpath;
};

elf_facts read_elf(const mapped_file &f)
{
	elf_facts out;
	if (!f.has(0, sizeof(Elf64_Ehdr)) || std::memcmp(f.data(), ELFMAG, SELFMAG) != 0 ||
	    f.data()[EI_CLASS] != ELFCLASS64)
		return out;
	Elf64_Ehdr eh;
	std::memcpy(&eh, f.data(), sizeof(eh));
	if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    !f.has(eh.e_phoff, uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr)))
		return out;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		std::memcpy(&ph, f.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		out.interp |= ph.p_type == PT_INTERP;
	}
	if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    !f.has(eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr)))
		return out; // section headers stripped
	auto shdr = [&](unsigned i) {
		Elf64_Shdr sh;
		std::memcpy(&sh, f.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		return sh;
	};
	// The NUL-terminated string at @off of string table section @link.
	auto str = [&](unsigned link, uint64_t off) -> const char * {
		if (link >= eh.e_shnum)
			return nullptr;
		const Elf64_Shdr t = shdr(link);
		if (!f.has(t.sh_offset, t.sh_size) || off >= t.sh_size)
			return nullptr;
		const char *p = reinterpret_cast<const char *>(f.data() + t.sh_offset + off);
		return strnlen(p, t.sh_size - off) < t.sh_size - off ? p : nullptr;
	};
	out.readable = true;
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		const Elf64_Shdr sh = shdr(i);
		if (!f.has(sh.sh_offset, sh.sh_size))
			continue;
		const unsigned char *base = f.data() + sh.sh_offset;
		if (sh.sh_type == SHT_DYNSYM && sh.sh_entsize == sizeof(Elf64_Sym)) {
			for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= sh.sh_size;
			     off += sizeof(Elf64_Sym)) {
				Elf64_Sym sym;
				std::memcpy(&sym, base + off, sizeof(sym));
				const char *n = sym.st_shndx == SHN_UNDEF
						    ? str(sh.sh_link, sym.st_name)
						    : nullptr;
				if (!n)
					continue;
				out.setsockopt |= !std::strcmp(n, "setsockopt");
				out.dlopen |= !std::strcmp(n, "dlopen");
				out.exec |= !std::strncmp(n, "exec", 4) ||
					    !std::strcmp(n, "posix_spawn") ||
					    !std::strcmp(n, "posix_spawnp");
			}
		} else if (sh.sh_type == SHT_DYNAMIC && sh.sh_entsize == sizeof(Elf64_Dyn)) {
			for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= sh.sh_size;
			     off += sizeof(Elf64_Dyn)) {
				Elf64_Dyn d;
				std::memcpy(&d, base + off, sizeof(d));
				if (d.d_tag == DT_NULL)
					break;
				const char *v = d.d_tag == DT_NEEDED || d.d_tag == DT_RUNPATH ||
							d.d_tag == DT_RPATH
						    ? str(sh.sh_link, d.d_un.d_val)
						    : nullptr;
				if (v && d.d_tag == DT_NEEDED)
					out.needed.emplace_back(v);
				else if (v)
					out.runpath.emplace_back(v);
			}
		}
	}
	return out;
}

std::vector<std::string> split(const std::string &s, char sep)
{
	std::vector<std::string> out;
	size_t start = 0;
	for (;;) {
		size_t end = s.find(sep, start);
		out.push_back(
		    s.substr(start, end == std::string::npos ? std::string::npos : end - start));
		if (end == std::string::npos)
			return out;
		start = end + 1;
	}
}

// Where ld.so would find DT_NEEDED @name (close enough: RUNPATH/RPATH with
// $ORIGIN, LD_LIBRARY_PATH, the multiarch and plain library directories).
std::string find_library(const std::string &name, const elf_facts &from, const std::string &origin)
{
	if (name.find('/') != std::string::npos)
		return access(name.c_str(), R_OK) == 0 ? name : "";
	std::vector<std::string> dirs;
	for (const auto &rp : from.runpath)
		for (auto d : split(rp, ':')) {
			if (d.rfind("$ORIGIN", 0) == 0)
				d.replace(0, 7, origin);
			dirs.push_back(d);
		}
	if (const char *llp = std::getenv("LD_LIBRARY_PATH"))
		for (const auto &d : split(llp, ':'))
			dirs.push_back(d);
	for (const char *d : {"/lib/" SOCKBUF_MULTIARCH, "/usr/lib/" SOCKBUF_MULTIARCH,
			      "/usr/local/lib", "/lib64", "/usr/lib64", "/lib", "/usr/lib"})
		dirs.emplace_back(d);
	for (const auto &d : dirs) {
		std::string full = (d.empty() ? "." : d) + "/" + name;
		if (access(full.c_str(), R_OK) == 0)
			return full;
	}
	return {};
}

// The program at @path and every library it loads: does any import
// setsockopt (the shim interposes it), and does any start programs?
linkage elf_linkage(const std::string &path, bool *launcher, bool *loader)
{
	mapped_file f(path);
	const elf_facts top = read_elf(f);
	if (!top.readable)
		return linkage::unknown;
	if (!top.interp)
		return linkage::static_exe;
	bool sso = top.setsockopt;
	*launcher = top.exec;
	*loader = top.dlopen;
	std::vector<std::pair<std::string, std::string>> todo; // (lib, origin)
	std::vector<std::string> seen;
	const std::string origin = path.substr(0, path.rfind('/'));
	for (const auto &n : top.needed)
		todo.emplace_back(find_library(n, top, origin), n);
	while (!todo.empty() && seen.size() < 256) {
		const std::string lib = todo.back().first;
		todo.pop_back();
		if (lib.empty() || std::find(seen.begin(), seen.end(), lib) != seen.end())
			continue;
		seen.push_back(lib);
		mapped_file g(lib);
		const elf_facts e = read_elf(g);
		sso |= e.setsockopt;
		*launcher |= e.exec && lib.find("/libc.so") == std::string::npos;
		*loader |= e.dlopen && lib.find("/libc.so") == std::string::npos;
		const std::string lorigin = lib.substr(0, lib.rfind('/'));
		for (const auto &n : e.needed)
			todo.emplace_back(find_library(n, e, lorigin), n);
	}
	return sso ? linkage::dynamic_libc : linkage::dynamic_nolibc;
}

bool in_groups(gid_t gid)
{
	if (gid == getegid())
		return true;
	int n = getgroups(0, nullptr);
	if (n <= 0)
		return false;
	std::vector<gid_t> g(static_cast<size_t>(n));
	n = getgroups(n, g.data());
	for (int i = 0; i < n; i++)
		if (g[size_t(i)] == gid)
			return true;
	return false;
}

// Would executing @path set AT_SECURE for this process?
bool secure_exec(const std::string &path, std::string *why)
{
	struct stat st;
	if (stat(path.c_str(), &st) != 0)
		return false;
	if ((st.st_mode & S_ISUID) && st.st_uid != geteuid()) {
		*why = "set-user-ID";
		return true;
	}
	if ((st.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) && !in_groups(st.st_gid)) {
		*why = "set-group-ID";
		return true;
	}
	if (geteuid() != 0 && getxattr(path.c_str(), "security.capability", nullptr, 0) > 0) {
		*why = "file capabilities";
		return true;
	}
	return false;
}

// "#!/usr/bin/env python3 -u" -> "/usr/bin/python3"; "" when not a script.
std::string script_interpreter(const mapped_file &f)
{
	if (!f.has(0, 2) || f.data()[0] != '#' || f.data()[1] != '!')
		return {};
	size_t end = 2;
	while (end < f.size() && end < 256 && f.data()[end] != '\n')
		end++;
	std::string line(reinterpret_cast<const char *>(f.data()) + 2, end - 2);
	std::vector<std::string> words;
	size_t i = 0;
	while (i < line.size()) {
		while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
			i++;
		size_t j = i;
		while (j < line.size() && line[j] != ' ' && line[j] != '\t')
			j++;
		if (j > i)
			words.push_back(line.substr(i, j - i));
		i = j;
	}
	if (words.empty())
		return {};
	std::string interp = words[0];
	if (interp.size() >= 4 && interp.compare(interp.size() - 4, 4, "/env") == 0 &&
	    words.size() > 1 && words[1][0] != '-')
		interp = resolve_command(words[1].c_str());
	return interp;
}

} // namespace

std::string resolve_command(const char *cmd)
{
	if (std::strchr(cmd, '/'))
		return access(cmd, F_OK) == 0 ? cmd : "";
	const char *path = std::getenv("PATH");
	std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
	size_t start = 0;
	for (;;) {
		size_t colon = p.find(':', start);
		std::string dir =
		    p.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
		std::string full = (dir.empty() ? "." : dir) + "/" + cmd;
		if (access(full.c_str(), X_OK) == 0)
			return full;
		if (colon == std::string::npos)
			return {};
		start = colon + 1;
	}
}

target_info inspect(const std::string &path)
{
	target_info t;
	t.path = path;
	if (path.empty())
		return t;
	std::string interp;
	{
		mapped_file f(path);
		interp = script_interpreter(f);
	}
	// What is executed in the end: a script's interpreter, which the
	// kernel runs with its own set-user-ID bits and capabilities, never
	// the script's.  Secure execution and linkage are that file's.
	const std::string &exe = interp.empty() ? path : interp;
	t.secure = secure_exec(exe, &t.secure_why);
	t.script = interp;
	t.link = elf_linkage(exe, &t.launcher, &t.loader);
	return t;
}

const char *linkage_text(linkage l, bool loader)
{
	if (l == linkage::dynamic_nolibc && loader)
		return "imports no setsockopt itself, nor do the libraries it starts with, but "
		       "it loads others with dlopen() (Python's _socket module), which may: the "
		       "preload reaches those";
	switch (l) {
	case linkage::dynamic_libc:
		return "imports setsockopt";
	case linkage::dynamic_nolibc:
		return "imports no setsockopt (nor does any library it loads)";
	case linkage::static_exe:
		return "statically linked";
	case linkage::unknown:
		break;
	}
	return "not an ELF program this tool reads";
}

} // namespace sockbuf::cli::run
