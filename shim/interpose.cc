// SPDX-License-Identifier: MIT
// The exported symbols of libsockbuf-shim.so and its load-time setup.
// Everything else in the library is hidden (exports.map).
#include "engine.h"
#include "fork_seed.h"
#include "guard.h"
#include "init.h"
#include "log.h"
#include "real.h"

#include "read_file.h"

#include <sockbuf/sockbuf.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#define SHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace sockbuf::shim
{

namespace
{

constexpr const char *lib_file_name = "libsockbuf-shim.so";

// The configuration file's text; static so that load() needs no heap.
char g_file_text[8192];

void say(const char *text)
{
	if (text && *text) {
		ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
		(void)ignored;
	}
}

// Reads the named or default configuration file.  A missing default file
// is normal; a missing file the user named is an error.
void read_file(load_input *in)
{
	const char *named = std::getenv("SOCKBUF_SHIM_CONF");
	in->file_name = named && *named ? named : default_conf_path;
	ssize_t n = fileio::read_file(in->file_name, g_file_text, sizeof(g_file_text));
	if (n < 0) {
		if (named && *named)
			in->file_error = std::strerror(int(-n));
		return;
	}
	size_t got = size_t(n);
	if (got == sizeof(g_file_text)) {
		in->file_error = "file larger than 8 KiB";
		return;
	}
	in->file = g_file_text;
	in->file_len = got;
}

void drop_preload()
{
	// getenv returns the environment's own string: edit it in place so
	// that programs this one executes start without the shim.
	if (char *preload = std::getenv("LD_PRELOAD"))
		drop_from_preload(preload, lib_file_name);
}

void load()
{
	int saved_errno = errno;
	real::resolve();
	load_input in;
	in.at_secure = getauxval(AT_SECURE);
	if (!in.at_secure) {
		in.env = std::getenv("SOCKBUF_SHIM");
		read_file(&in);
	}
	static load_result res; // static: config is large-ish, keep it off the stack
	decide(in, &res);
	say(res.warning);

	engine_state st;
	st.cfg = res.cfg;
	st.active = res.active;
	if (st.active) {
		if (st.cfg.exec_drop)
			drop_preload();
		char err[320];
		if (!log::open(st.cfg, err, sizeof(err))) {
			say("sockbuf-shim: ");
			say(err);
			say("; logging off\n");
		}
		// Fill the library's probe cache now: afterwards the library
		// reads cached facts without its mutex, from any context.
		struct sockbuf_probe_info info;
		int pret = sockbuf_probe(&info, 0);
		if (pret < 0) {
			say("sockbuf-shim: cannot probe the kernel's socket options; the shim is "
			    "inactive (plain libc behaviour)\n");
			st.active = false;
		} else {
			st.force_ok = st.cfg.allow_force && (info.features & SOCKBUF_FEAT_FORCE);
			st.reserve_state = info.reserve_state;
			st.socket_events = needs_socket_events(st.cfg);
		}
	}
	engine_install(st);
	if (st.active && !install_fork_seed())
		say("sockbuf-shim: cannot register the fork handler; forked children will not "
		    "publish inherited floors\n");
	const unsigned int guard_flags = (st.cfg.guard_events ? SOCKBUF_GUARD_EVENTS : 0u) |
					 (st.cfg.guard_bpf ? SOCKBUF_GUARD_BPF : 0u) |
					 (st.cfg.guard_daemon ? 0u : SOCKBUF_GUARD_NO_DAEMON);
	if (st.active && st.cfg.guard_ms > 0 && !start_floor_guard(st.cfg.guard_ms, guard_flags))
		say("sockbuf-shim: cannot start the floor guard thread; going on without it\n");
	errno = saved_errno;
}

} // namespace

} // namespace sockbuf::shim

__attribute__((constructor)) static void sockbuf_shim_load()
{
	sockbuf::shim::load();
}

SHIM_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len) noexcept
{
	return sockbuf::shim::on_setsockopt(fd, level, name, val, len);
}

SHIM_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len) noexcept
{
	return sockbuf::shim::on_getsockopt(fd, level, name, val, len);
}

SHIM_EXPORT int listen(int fd, int backlog) noexcept
{
	return sockbuf::shim::on_listen(fd, backlog);
}

SHIM_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	return sockbuf::shim::on_connect(fd, addr, len);
}

SHIM_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return sockbuf::shim::on_accept(fd, addr, len, 0, false);
}

SHIM_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return sockbuf::shim::on_accept(fd, addr, len, flags, true);
}
