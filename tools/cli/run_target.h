// SPDX-License-Identifier: MIT
// What `sockbuf run` needs to know about a program before it starts it:
// can the LD_PRELOAD shim reach its setsockopt() calls at all?  It cannot
// when the program is statically linked, when it makes its own system
// calls (Go's net package, static or cgo: no libc setsockopt imported),
// or when it runs in secure execution (setuid, setgid, file
// capabilities), where ld.so ignores LD_PRELOAD.
#pragma once

#include <string>

namespace sockbuf::cli::run
{

enum class linkage {
	unknown,	// unreadable, not ELF, or an ELF this code does not parse
	dynamic_libc,	// it or a library it loads imports setsockopt: the shim sees it
	dynamic_nolibc, // dynamic, but nothing it loads imports setsockopt
	static_exe,	// no program interpreter (static, static-pie)
};

struct target_info {
	std::string path;   // the file that will be executed ("" when not found)
	std::string script; // for "#!" scripts: the interpreter examined instead
	linkage link = linkage::unknown;
	bool launcher = false; // it or a library it loads imports exec*/posix_spawn
	bool loader = false;   // it or a library it loads (not libc) imports dlopen
	bool secure = false;   // AT_SECURE for this user: setuid/setgid/capabilities
	std::string secure_why;
};

// The file execvp() would run for @cmd (PATH search for a bare name).
std::string resolve_command(const char *cmd);

// Examines @path (following one "#!" interpreter, and /usr/bin/env NAME).
target_info inspect(const std::string &path);

// Words for a linkage in the one-line report (@loader: target_info's).
const char *linkage_text(linkage l, bool loader = false);

} // namespace sockbuf::cli::run
