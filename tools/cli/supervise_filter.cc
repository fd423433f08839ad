// SPDX-License-Identifier: MIT
// The seccomp filter that sends setsockopt(SOL_SOCKET, SO_*BUF*) and
// listen() to the supervisor, and what this kernel offers the supervisor.
#include "supervise_parts.h"

#include "test_fault.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::cli::run::supervision
{

namespace
{

#if defined(__x86_64__)
constexpr uint32_t native_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t native_arch = AUDIT_ARCH_AARCH64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr uint32_t native_arch = AUDIT_ARCH_RISCV64;
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr uint32_t native_arch = AUDIT_ARCH_PPC64LE;
#elif defined(__s390x__)
constexpr uint32_t native_arch = AUDIT_ARCH_S390X;
#else
#define SOCKBUF_NO_SECCOMP_ARCH 1
constexpr uint32_t native_arch = 0;
#endif

// The low 32 bits of system call argument @i (level and optname are ints).
constexpr uint32_t arg_lo(int i)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return uint32_t(offsetof(struct seccomp_data, args) + size_t(i) * 8);
#else
	return uint32_t(offsetof(struct seccomp_data, args) + size_t(i) * 8 + 4);
#endif
}

#ifdef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
constexpr unsigned int filter_flag_wait_killable = SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
#else
constexpr unsigned int filter_flag_wait_killable = 1u << 5; // linux/seccomp.h, 5.19
#endif

int pidfd_getfd(int pidfd, int fd)
{
	return int(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
}

} // namespace

int sys_seccomp(unsigned int op, unsigned int flags, void *args)
{
	return int(syscall(SYS_seccomp, op, flags, args));
}

int pidfd_open(pid_t pid)
{
	return int(syscall(SYS_pidfd_open, pid, 0));
}

// Installs the filter in the calling process; the listener fd or -errno.
int install_filter()
{
	struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, native_arch, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    // listen(): the supervisor notes the port of a sized listener
	    // (see decide_listen()); to the last instruction.
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_listen, 11, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsockopt, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg_lo(1)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg_lo(2)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_SNDBUF, 4, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_RCVBUF, 3, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_SNDBUFFORCE, 2, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_RCVBUFFORCE, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
	// Once the supervisor has received a call, the caller waits for the
	// answer killably (5.19): a signal cannot make it return EINTR, which
	// setsockopt() never returns, after its size was applied.  Kernels
	// without the flag say EINVAL; the filter then goes without it.
	auto install = [&prog] {
		int fd = sys_seccomp(SECCOMP_SET_MODE_FILTER,
				     SECCOMP_FILTER_FLAG_NEW_LISTENER | filter_flag_wait_killable,
				     &prog);
		if (fd < 0 && errno == EINVAL)
			fd = sys_seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
					 &prog);
		return fd;
	};
	int fd = install();
	if (fd < 0 && errno == EACCES) {
		// Without CAP_SYS_ADMIN a filter needs no_new_privs (set-user-ID
		// programs then run without their privileges: see cmd_run.cc).
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			return -errno;
		fd = install();
	}
	return fd < 0 ? -errno : fd;
}

// Asks the kernel to wake the program and this process on the CPU that
// hands over (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 6.6): a trapped call is
// a strict ping-pong between the two, and a wakeup on another CPU costs
// more than the work.  Older kernels refuse it (EINVAL): nothing changes.
void sync_wakeups(int listener)
{
	constexpr unsigned long notif_set_flags = _IOW('!', 4, uint64_t);
	constexpr uint64_t fd_sync_wake_up = 1;
	ioctl(listener, notif_set_flags, fd_sync_wake_up);
}

} // namespace sockbuf::cli::run::supervision

namespace sockbuf::cli::run
{

using namespace supervision;

int supervisor_available(std::string *why)
{
#ifdef SOCKBUF_NO_SECCOMP_ARCH
	*why = "this architecture's seccomp audit value is not known to sockbuf";
	return -ENOSYS;
#else
	uint32_t action = SECCOMP_RET_USER_NOTIF;
	if (test_fault("notif") || sys_seccomp(SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
		int e = test_fault("notif") ? ENOSYS : errno;
		*why = fmt::format("seccomp user notification unavailable ({}; Linux 5.5 and "
				   "CONFIG_SECCOMP_FILTER)",
				   std::strerror(e));
		return -e;
	}
	int e = 0;
	if (test_fault("pidfd_getfd"))
		e = ENOSYS;
	else if (pidfd_getfd(-1, 0) < 0 && errno != EBADF)
		e = errno;
	if (e) {
		*why = fmt::format("pidfd_getfd() unavailable ({}; Linux 5.6)", std::strerror(e));
		return -e;
	}
	return 0;
#endif
}

} // namespace sockbuf::cli::run
