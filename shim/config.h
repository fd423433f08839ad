// SPDX-License-Identifier: MIT
// The shim's configuration: what it does with a program's buffer requests.
// Parsed once, at load time, from /etc/sockbuf/shim.conf (or the file named
// by SOCKBUF_SHIM_CONF) and then the SOCKBUF_SHIM environment variable.
// The parser never allocates: it may run inside any host program, and it is
// fuzzed.  The grammar is documented in shim/README.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sockbuf::shim
{

enum class policy : uint8_t {
	unset = 0,   // no rule at this level: ask the next one
	passthrough, // exactly libc
	initial,     // size request -> set_initial_bufsize (unlocked)
	lock,	     // the kernel's own behaviour: size and lock
};

// The part a socket plays, known once it listens, connects or is accepted.
enum role : uint8_t {
	role_any = 0, // not known yet (before listen/connect)
	role_listener,
	role_connecting,
	role_accepted,
	role_count,
};

enum dir : uint8_t { dir_snd = 0, dir_rcv = 1 };

enum class log_target : uint8_t { none = 0, to_stderr, to_fd, to_file };

struct port_rule {
	uint16_t port;
	policy pol;
};

inline constexpr int max_port_rules = 16;
inline constexpr int max_log_path = 256;

struct config {
	policy global = policy::initial;
	policy by_role[role_count] = {}; // [role_any] is unused
	// Initial sizes for sockets that never ask, in the kernel's unit (what
	// getsockopt returns).  [role_any] holds default_snd/default_rcv.
	int size[role_count][2] = {};
	port_rule ports[max_port_rules] = {};
	int nports = 0;
	bool allow_force = false; // the shim may use SO_*BUFFORCE
	bool exec_drop = false;	  // remove the shim from LD_PRELOAD at load
	bool reserve = false;	  // SO_RESERVE_MEM of the floors the shim sets
	int guard_ms = 0;	  // floor guard thread's interval (0: none)
	bool guard_events = true; // the guard wakes on the kernel's cuts where it can
	bool guard_bpf = false;	  // the guard's passes as one BPF iterator
	// The guard stands down for sockbufd where the daemon keeps every
	// kind of cut within the guard's interval (off: it never does).
	bool guard_daemon = true;
	log_target log = log_target::none;
	int log_fd = -1;
	int log_rate = 10; // lines per second at most
	char log_path[max_log_path] = {};
};

// Reads @len bytes of @text (items separated by ',' or newlines; '#' starts
// a comment to the end of the line) on top of @cfg: later items win, so a
// file and then the environment can be applied in turn.  On error returns
// false, leaves a one-line reason in @err (always NUL-terminated when
// @errlen > 0) and leaves @cfg partly updated: callers discard it.
bool parse(const char *text, size_t len, config *cfg, char *err, size_t errlen);

// Whether listen()/connect()/accept() must look at the socket at all:
// role or port rules, sizes for sockets that never ask, or reserve:on.
bool needs_socket_events(const config &cfg);

// The policy for a socket in @r whose relevant port is @port (0: unknown):
// a port rule, else a role rule, else the global policy.
policy resolve(const config &cfg, role r, uint16_t port);

// The configured size for direction @d of a socket in role @r: the role's
// own size, else default_snd/default_rcv; 0 when none.
int default_size(const config &cfg, role r, dir d);

const char *policy_name(policy p);
const char *role_name(role r);

} // namespace sockbuf::shim
