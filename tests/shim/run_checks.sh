#!/bin/sh
# `sockbuf run`: finds the shim next to itself, sets LD_PRELOAD and
# SOCKBUF_SHIM, keeps an existing LD_PRELOAD, refuses a bad configuration
# naming the argument, says which way a run goes and when the preload path
# cannot work; the seccomp supervisor on the child's own socket (no root
# needed: the filter comes with no_new_privs).
# usage: run_checks.sh SOCKBUF SHIM_CHILD STATIC_PROGRAM LEADER_EXIT
set -u
sockbuf=$1 child=$2 static=$3 leader_exit=$4
failures=0
expect() { # NAME WANT OUTPUT
	case "$3" in
	*"$2"*) echo "ok: $1: $3" ;;
	*) echo "FAIL: $1: got '$3', want '$2'"; failures=$((failures + 1)) ;;
	esac
}

expect "default policy" "shim=1 lock=0 rcvbuf=131072" "$("$sockbuf" run -- "$child")"
expect "policy lock" "shim=1 lock=2" "$("$sockbuf" run --policy lock -- "$child")"
expect "without --" "shim=1 lock=0" "$("$sockbuf" run "$child")"
expect "extra config" "shim=1 lock=2" \
	"$("$sockbuf" run --config policy:passthrough -- "$child")"
expect "--reserve" "SOCKBUF_SHIM=policy:initial,reserve:on" \
	"$("$sockbuf" run --reserve -- env | grep '^SOCKBUF_SHIM=')"
shim_dir=$(readlink -f "$(dirname "$(readlink -f "$sockbuf")")/../lib")
expect "keeps LD_PRELOAD, shim first" "preload=$shim_dir/libsockbuf-shim.so:libm.so.6" \
	"$(LD_PRELOAD=libm.so.6 "$sockbuf" run -- "$child")"
expect "bad policy refused" "bad configuration: item 1 'policy:bogus'" \
	"$("$sockbuf" run --policy bogus -- "$child" 2>&1; echo " rc=$?")"
expect "bad policy exit 2" "rc=2" "$("$sockbuf" run --policy bogus -- "$child" 2>/dev/null; echo " rc=$?")"
expect "missing command" "rc=127" "$("$sockbuf" run -- /nonexistent/cmd 2>/dev/null; echo " rc=$?")"
expect "shim not found" "cannot find libsockbuf-shim.so" \
	"$(SOCKBUF_SHIM_PATH=/nonexistent/libsockbuf-shim.so "$sockbuf" run -- "$child" 2>&1)"

# Bad input names the argument; exit 2.
expect "unknown option named" "unknown option '--polcy'" \
	"$("$sockbuf" run --polcy lock -- "$child" 2>&1)"
expect "a value cannot add an item" "--floor-guard '10,force:allow': a value may not hold" \
	"$("$sockbuf" run --floor-guard '10,force:allow' -- "$child" 2>&1)"
expect "a value cannot start a comment" "--log 'run#1.log': a value may not hold" \
	"$("$sockbuf" run --log 'run#1.log' --floor-guard 10 -- "$child" 2>&1)"
expect "a value cannot hold a policy item" "rc=2" \
	"$("$sockbuf" run --policy 'initial,policy:lock' -- "$child" 2>/dev/null; echo " rc=$?")"
expect "unknown option exit 2" "rc=2" "$("$sockbuf" run --polcy lock -- "$child" 2>/dev/null; echo " rc=$?")"
expect "missing value named" "option '--policy' needs a value" "$("$sockbuf" run --policy 2>&1)"
expect "bad --via named" "--via 'ld': want auto, seccomp or preload" \
	"$("$sockbuf" run --via ld -- "$child" 2>&1)"
expect "no command" "no command to run" "$("$sockbuf" run --policy lock 2>&1)"

# The way a run goes, in one line.
expect "dynamic program: preload" "via preload: $child imports setsockopt" \
	"$("$sockbuf" run -- "$child" 2>&1 >/dev/null)"
expect "-q: no line" "" "$("$sockbuf" run -q -- "$child" 2>&1 >/dev/null)"
expect "launcher: preload" "via preload: /usr/bin/env" "$("$sockbuf" run -- env true 2>&1)"
expect "static program: seccomp" "via seccomp supervisor: $static statically linked" \
	"$("$sockbuf" run -- "$static" 2>&1)"
expect "static program, --via preload: said" \
	"$static statically linked: the shim cannot reach its setsockopt() and --via preload was asked for; it runs unchanged" \
	"$("$sockbuf" run --via preload -- "$static" 2>&1)"
expect "no user notification: said, runs plain" "the seccomp supervisor is unavailable: seccomp user notification unavailable" \
	"$(SOCKBUF_RUN_FAULT=notif "$sockbuf" run -- "$static" 2>&1)"
expect "no pidfd_getfd: said" "pidfd_getfd() unavailable" \
	"$(SOCKBUF_RUN_FAULT=pidfd_getfd "$sockbuf" run -- "$static" 2>&1)"
expect "no pidfd_getfd, --via seccomp: exit 125" "rc=125" \
	"$(SOCKBUF_RUN_FAULT=pidfd_getfd "$sockbuf" run --via seccomp -- "$child" 2>/dev/null; echo " rc=$?")"
expect "no user notification: preload still works" "shim=1 lock=0 rcvbuf=131072" \
	"$(SOCKBUF_RUN_FAULT=notif "$sockbuf" run -- "$child" 2>/dev/null)"
expect "seccomp refuses preload-only items" "reserve:on need the preload path" \
	"$("$sockbuf" run --via seccomp --reserve -- "$child" 2>&1; echo " rc=$?")"

# The floor guard's sources: options into the configuration, bad values
# named, and the way's line says what the guard gets.
expect "--guard-events/--guard-bpf" "SOCKBUF_SHIM=policy:initial,guard:5,guard_events:off,guard_bpf:on" \
	"$("$sockbuf" run --floor-guard 5 --guard-events off --guard-bpf on -- env | grep '^SOCKBUF_SHIM=')"
expect "bad --guard-events named" "--guard-events 'maybe': want on or off" \
	"$("$sockbuf" run --guard-events maybe -- "$child" 2>&1)"
expect "bad --guard-events exit 2" "rc=2" \
	"$("$sockbuf" run --guard-events maybe -- "$child" 2>/dev/null; echo " rc=$?")"
expect "bad --guard-bpf named" "--guard-bpf '1': want on or off" \
	"$("$sockbuf" run --guard-bpf 1 -- "$child" 2>&1)"
expect "bad guard_bpf item named" "item 2 'guard_bpf:yes': guard_bpf must be on or off" \
	"$("$sockbuf" run --config guard_bpf:yes -- "$child" 2>&1)"
expect "events off: polling, said" "; floor guard: events off, polling every 5 ms" \
	"$("$sockbuf" run --floor-guard 5 --guard-events off -- "$child" 2>&1 >/dev/null)"
line=$("$sockbuf" run --floor-guard 5 -- "$child" 2>&1 >/dev/null)
case "$line" in
*"; floor guard: events on (fexit on "*", safety-net passes every 1000 ms"* | \
	*"; floor guard: events refused: E"*", polling every 5 ms"*) echo "ok: events: got or refused, said: $line" ;;
*) echo "FAIL: events: the line says neither events on nor why not: $line"; failures=$((failures + 1)) ;;
esac
expect "supervisor's guard, said" "; floor guard: the supervisor's, polling every 5 ms" \
	"$("$sockbuf" run --via seccomp --floor-guard 5 -- "$child" 2>&1 >/dev/null)"

# setsockopt calls that fail: a closed fd, a bad pointer, a short optlen;
# and a UDP socket, which keeps the kernel's lock.
errors_py='
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
v = ctypes.c_int(65536)
out = []
for what, fd, ptr, n in (("badfd", 999, ctypes.byref(v), 4),
                         ("efault", socket.socket().detach(), ctypes.c_void_p(8), 4),
                         ("short", socket.socket().detach(), ctypes.byref(v), 2)):
    r = libc.setsockopt(fd, socket.SOL_SOCKET, socket.SO_RCVBUF, ptr, n)
    out += [what, str(r), str(ctypes.get_errno())]
u = socket.socket(type=socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
print(" ".join(out), "udp-lock", u.getsockopt(socket.SOL_SOCKET, 72))'

# setsockopt(SO_RCVBUF) with every class of length, on a fresh socket
# each: return value, errno and the size read back.  The kernel takes the
# length as a signed int: negative ones are EINVAL, never a size applied.
optlen_py='
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
v = ctypes.c_int(40000)  # stored as 80000, not the default
out = []
for n in (-1, -2147483644, 0, 3, 4, 8, 4096):
    s = socket.socket()
    ctypes.set_errno(0)
    r = libc.setsockopt(s.fileno(), socket.SOL_SOCKET, socket.SO_RCVBUF, ctypes.byref(v),
                        ctypes.c_int(n))
    e = ctypes.get_errno() if r else 0
    out.append(f"{n}:{r}/{e}/{s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)}")
    s.close()
print(" ".join(out))'

thread_py='
import socket, threading
def f():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    print("thread lock", s.getsockopt(socket.SOL_SOCKET, 72), "rcvbuf",
          s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
t = threading.Thread(target=f)
t.start()
t.join()'

# A thread with a descriptor table of its own (unshare(CLONE_FILES)) has
# its own socket at the number the main thread's socket has in the
# leader's table: its call must size its own socket, never the main one.
own_table_py='
import ctypes, os, socket, threading
libc = ctypes.CDLL(None, use_errno=True)
m = socket.socket()
before = m.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
out = []
def f():
    if libc.unshare(0x400) != 0:  # CLONE_FILES
        out.append("unshare failed")
        return
    os.close(m.fileno())
    t = socket.socket()
    if t.fileno() != m.fileno():
        out.append("setup: fd %d, not %d" % (t.fileno(), m.fileno()))
        return
    t.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    out.append("thread %d" % t.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
th = threading.Thread(target=f)
th.start()
th.join()
after = m.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
print(*out, "main", "unchanged" if after == before else "%d -> %d" % (before, after))'

# The supervisor: the request becomes an unlocked initial size, read-back
# unchanged; --policy lock leaves the kernel's lock; fork and exec followed.
if "$sockbuf" run -q --via seccomp -- true 2>/dev/null; then
	expect "seccomp: unlocked, read-back 131072" "shim=0 lock=0 rcvbuf=131072 preload=-" \
		"$("$sockbuf" run -q --via seccomp -- "$child")"
	expect "seccomp --policy lock" "shim=0 lock=2 rcvbuf=131072" \
		"$("$sockbuf" run -q --via seccomp --policy lock -- "$child")"
	forks="(\"$child\"); exec \"$child\""
	expect "seccomp: fork and exec followed" "lock=0 rcvbuf=131072 preload=- lock=0 rcvbuf=131072 preload=-" \
		"$("$sockbuf" run -q --via seccomp -- sh -c "$forks" | sed 's/secure=0 shim=0 //' | tr '\n' ' ')"
	expect "seccomp: errors as the kernel gives them" "badfd -1 9 efault -1 14 short -1 22 udp-lock 2" \
		"$("$sockbuf" run -q --via seccomp -- python3 -c "$errors_py")"
	expect "seccomp: every length as the kernel takes it" "$(python3 -c "$optlen_py")" \
		"$("$sockbuf" run -q --via seccomp -- python3 -c "$optlen_py")"
	expect "seccomp: a thread's call (not the leader's)" "thread lock 0 rcvbuf 131072" \
		"$("$sockbuf" run -q --via seccomp -- python3 -c "$thread_py")"
	expect "seccomp: a thread's own descriptor table" "thread 16384 main unchanged" \
		"$("$sockbuf" run -q --via seccomp -- python3 -c "$own_table_py")"
	# Before 6.9 (no PIDFD_THREAD; the seam makes this kernel one): the
	# leader's table, and kcmp() says the thread's number is another file.
	expect "seccomp: a thread's own descriptor table, no PIDFD_THREAD" "thread 16384 main unchanged" \
		"$(SOCKBUF_RUN_FAULT=no_pidfd_thread "$sockbuf" run -q --via seccomp -- python3 -c "$own_table_py")"
	# A leader that exited before the thread that sizes a socket: the
	# thread's own pidfd reaches it; without PIDFD_THREAD it cannot be
	# reached, and the log says so (the kernel's own call, locked).
	expect "seccomp: the leader exited first" "lock 0 rcvbuf 131072" \
		"$("$sockbuf" run -q --via seccomp -- "$leader_exit")"
	out=$(SOCKBUF_RUN_FAULT=no_pidfd_thread "$sockbuf" run -q --via seccomp --log stderr -- "$leader_exit" 2>&1)
	expect "seccomp: the leader exited first, no PIDFD_THREAD: said" "not in the leader's descriptor table" "$out"
	expect "seccomp: the leader exited first, no PIDFD_THREAD: the kernel's call" "lock 2 rcvbuf 131072" "$out"
	# The program exits first (its child waits until it has been reaped);
	# the supervisor's background copy answers the child.
	daemon="( while kill -0 \$\$ 2>/dev/null; do :; done; exec \"$child\" ) & exit 0"
	expect "seccomp: a daemon's child served after the program exits" "shim=0 lock=0 rcvbuf=131072" \
		"$("$sockbuf" run -q --via seccomp -- sh -c "$daemon")"
	expect "seccomp: exit status" "rc=7" \
		"$("$sockbuf" run -q --via seccomp -- sh -c 'exit 7'; echo " rc=$?")"
	expect "seccomp: 128 + signal" "rc=143" \
		"$("$sockbuf" run -q --via seccomp -- sh -c 'kill -TERM $$'; echo " rc=$?")"
	if [ "$(id -u)" = 0 ]; then
		# FORCE under force:allow only where the program's own call would
		# pass: CAP_NET_ADMIN in the initial user namespace (root in a user
		# namespace of its own gets EPERM, even in a network namespace
		# that namespace owns). Result and size as the plain call gives;
		# the lock bit is the policy's (0).
		force_py='
import errno, socket
s = socket.socket()
try:
    s.setsockopt(socket.SOL_SOCKET, 33, 4 << 20)  # SO_RCVBUFFORCE
    r = "ok"
except OSError as e:
    r = errno.errorcode[e.errno]
print(r, s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))'
		for pre in "" "unshare -Ur" "unshare -Urn" "setpriv --inh-caps=-net_admin --bounding-set=-net_admin"; do
			# shellcheck disable=SC2086 # the prefix is words
			if ! plain=$($pre python3 -c "$force_py" 2>&1); then
				echo "skip: FORCE ${pre:-as root}: cannot run plain: $plain"
				continue
			fi
			# shellcheck disable=SC2086
			expect "seccomp force:allow ${pre:-as root}: as the plain call" "$plain" \
				"$("$sockbuf" run -q --via seccomp --config force:allow -- $pre python3 -c "$force_py" 2>&1)"
		done
		suid=$(mktemp -d)/suid_child
		cp "$child" "$suid" && chown nobody "$suid" && chmod 4755 "$suid"
		expect "set-user-ID as root: the supervisor" "via seccomp supervisor: $suid is set-user-ID" \
			"$("$sockbuf" run -- "$suid" 2>&1 >/dev/null)"
		expect "set-user-ID as root: converted" "secure=1 shim=0 lock=0" \
			"$("$sockbuf" run -- "$suid" 2>/dev/null)"
		expect "set-user-ID, --via preload: said" "is set-user-ID: ld.so ignores LD_PRELOAD" \
			"$("$sockbuf" run --via preload -- "$suid" 2>&1)"
		rm -rf "$(dirname "$suid")"
		# The kernel ignores a script's set-user-ID bit: the shim reaches
		# its interpreter, and nothing may say otherwise.
		sdir=$(mktemp -d) && chmod 755 "$sdir"
		printf '#!/bin/sh\nexec "%s"\n' "$child" >"$sdir/suid.sh"
		chown nobody "$sdir/suid.sh" && chmod 4755 "$sdir/suid.sh"
		expect "set-user-ID script: preload, as for any script" "via preload: $sdir/suid.sh (script for /bin/sh)" \
			"$("$sockbuf" run -- "$sdir/suid.sh" 2>&1 >/dev/null)"
		expect "set-user-ID script: the shim is active" "secure=0 shim=1" \
			"$("$sockbuf" run -- "$sdir/suid.sh" 2>/dev/null)"
		rm -rf "$sdir"
		# A static set-user-ID program run by a user: the shim cannot
		# reach it and the supervisor would take its privileges (the
		# filter brings no_new_privs): auto leaves it unchanged and says
		# why, never the supervisor.
		sdir=$(mktemp -d) && chmod 755 "$sdir"
		sstatic=$sdir/suid_static
		cp "$static" "$sstatic" && chmod 4755 "$sstatic"
		out=$(su nobody -s /bin/sh -c "'$sockbuf' run -- '$sstatic'" 2>&1 </dev/null)
		expect "static set-user-ID as a user: auto keeps its privileges" \
			"it runs unchanged (--via seccomp would run it without those privileges)" "$out"
		case "$out" in
		*"via seccomp supervisor"*)
			echo "FAIL: static set-user-ID as a user: supervised: $out"
			failures=$((failures + 1)) ;;
		esac
		# A non-dumpable program run by a user: the supervisor (same user,
		# no CAP_SYS_PTRACE) cannot read its memory; said, never silent.
		nodump_py='
import ctypes, socket
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
print("lock", s.getsockopt(socket.SOL_SOCKET, 72))'
		out=$(su nobody -s /bin/sh -c "'$sockbuf' run -q --via seccomp -- python3 -c '$nodump_py'" 2>&1 </dev/null)
		expect "non-dumpable program as a user: said" "needs the rights of ptrace attach" "$out"
		expect "non-dumpable program as a user: the kernel's call" "lock 2" "$out"
		expect "as a user under the supervisor: no_new_privs said" \
			"and the programs it starts run with no_new_privs" \
			"$(su nobody -s /bin/sh -c "'$sockbuf' run --via seccomp -- '$child'" 2>&1 </dev/null)"
		rm -rf "$sdir"
	fi
else
	echo "skip: the seccomp supervisor is unavailable here: $("$sockbuf" run --via seccomp -- true 2>&1)"
fi
[ "$failures" -eq 0 ]
