// SPDX-License-Identifier: MIT
// The public entry points: validate, ask the probe, hand over to exec.
#include "buffer.h"
#include "exec.h"
#include "probe.h"
#include "sys.h"
#include "validate.h"

#include <sockbuf/sockbuf.h>

#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

using namespace sockbuf;

namespace
{

constexpr unsigned int initial_flags = SOCKBUF_F_ALL_;
constexpr unsigned int lock_flags = SOCKBUF_F_ALLOW_FORCE;

int set_initial(int fd, const int size[2], unsigned int flags, struct sockbuf_report *report,
		int reserve_bytes)
{
	struct sockbuf_report local;
	op o{};
	o.fd = fd;
	o.protocol = IPPROTO_TCP;
	o.size[0] = size[0];
	o.size[1] = size[1];
	o.flags = flags;
	o.reserve_bytes = reserve_bytes;
	o.rep = report ? report : &local;
	int ret = probe::cached(&o.facts);
	if (ret < 0)
		return ret;
	return exec::run(o, exec::mode::initial);
}

int check_floor_values(const struct sockbuf_floor *floor)
{
	if (!floor)
		return -EINVAL;
	return validate::sizes(floor->snd, floor->rcv, true);
}

} // namespace

extern "C" {

int sockbuf_probe(struct sockbuf_probe_info *out, unsigned int flags)
{
	if (flags & ~SOCKBUF_PROBE_FRESH)
		return -EINVAL;
	return probe::get(out, flags & SOCKBUF_PROBE_FRESH);
}

int sockbuf_set_initial_bufsize(int fd, int sndbuf, int rcvbuf, unsigned int flags,
				struct sockbuf_report *report)
{
	int ret = validate::flags(flags, initial_flags);
	if (ret == 0)
		ret = validate::sizes(sndbuf, rcvbuf, false);
	if (ret == 0)
		ret = validate::tcp_socket(fd);
	if (ret < 0)
		return ret;
	const int size[2] = {sndbuf, rcvbuf};
	return set_initial(fd, size, flags, report, 0);
}

int sockbuf_lock_bufsize(int fd, int sndbuf, int rcvbuf, unsigned int flags,
			 struct sockbuf_report *report)
{
	int protocol = -1;
	int ret = validate::flags(flags, lock_flags);
	if (ret == 0)
		ret = validate::sizes(sndbuf, rcvbuf, false);
	if (ret == 0)
		ret = validate::socket_protocol(fd, &protocol);
	if (ret < 0)
		return ret;

	struct sockbuf_report local;
	op o{};
	o.fd = fd;
	o.protocol = protocol;
	o.size[0] = sndbuf;
	o.size[1] = rcvbuf;
	o.flags = flags;
	o.rep = report ? report : &local;
	ret = probe::cached(&o.facts);
	if (ret < 0)
		return ret;
	return exec::run(o, exec::mode::lock);
}

int sockbuf_get_state(int fd, struct sockbuf_state *out)
{
	if (!out)
		return -EINVAL;
	struct sockbuf_state st;
	std::memset(&st, 0, sizeof(st));
	st.lock = st.tcp_state = st.snd_wscale = st.rcv_wscale = -1;
	int ret = validate::socket_protocol(fd, &st.protocol);
	if (ret == 0)
		ret = sys::get_int(fd, SOL_SOCKET, SO_DOMAIN, &st.domain);
	if (ret == 0)
		ret = sys::get_int(fd, SOL_SOCKET, SO_TYPE, &st.type);
	if (ret == 0)
		ret = buffer::get_size(fd, buffer::snd, &st.sndbuf);
	if (ret == 0)
		ret = buffer::get_size(fd, buffer::rcv, &st.rcvbuf);
	if (ret < 0)
		return ret;

	probe::facts facts;
	ret = probe::cached(&facts);
	if (ret < 0)
		return ret;
	if (facts.features & SOCKBUF_FEAT_BUF_LOCK) {
		ret = buffer::get_lock(fd, &st.lock);
		if (ret < 0)
			return ret;
	}
	// A raw socket of protocol TCP (SOCK_RAW) has no TCP state to read.
	if (st.protocol == IPPROTO_TCP && st.type == SOCK_STREAM &&
	    (facts.features & SOCKBUF_FEAT_TCP_INFO)) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		std::memset(&ti, 0, sizeof(ti));
		if (sys::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
			st.tcp_state = ti.tcpi_state;
			if (ti.tcpi_options & TCPI_OPT_WSCALE) {
				st.snd_wscale = ti.tcpi_snd_wscale;
				st.rcv_wscale = ti.tcpi_rcv_wscale;
			} else if (ti.tcpi_state != TCP_CLOSE && ti.tcpi_state != TCP_LISTEN &&
				   ti.tcpi_state != TCP_SYN_SENT) {
				// Handshake done without the option: scale 0.
				st.snd_wscale = st.rcv_wscale = 0;
			}
		}
	}
	*out = st;
	return 0;
}

int sockbuf_report_floor(const struct sockbuf_report *report, struct sockbuf_floor *out)
{
	if (!report || !out)
		return -EINVAL;
	out->snd = report->snd.floor;
	out->rcv = report->rcv.floor;
	return 0;
}

int sockbuf_check_floor(int fd, const struct sockbuf_floor *floor, struct sockbuf_state *now)
{
	int ret = check_floor_values(floor);
	if (ret < 0)
		return ret;
	if (now) {
		ret = sockbuf_get_state(fd, now);
		if (ret < 0)
			return ret;
		return (floor->snd && now->sndbuf < floor->snd ? SOCKBUF_SND : 0) |
		       (floor->rcv && now->rcvbuf < floor->rcv ? SOCKBUF_RCV : 0);
	}
	if (floor->snd == 0 && floor->rcv == 0) {
		int protocol;
		ret = validate::socket_protocol(fd, &protocol);
		return ret < 0 ? ret : 0;
	}
	// The cheap path a floor guard samples with: one getsockopt per
	// direction, which also tells a closed fd or a non-socket.
	if (fd < 0)
		return -EBADF;
	int below = 0;
	const int want[2] = {floor->snd, floor->rcv};
	for (int i = 0; i < 2; i++) {
		if (want[i] == 0)
			continue;
		int size = 0;
		ret = buffer::get_size(fd, i, &size);
		if (ret < 0)
			return ret;
		if (size < want[i])
			below |= buffer::dir_bit(i);
	}
	return below;
}

int sockbuf_restore_floor(int fd, const struct sockbuf_floor *floor, unsigned int flags,
			  struct sockbuf_report *report)
{
	int ret = check_floor_values(floor);
	if (ret == 0 && floor->snd == 0 && floor->rcv == 0)
		ret = -EINVAL;
	if (ret == 0)
		ret = validate::flags(flags, initial_flags);
	if (ret == 0)
		ret = validate::tcp_socket(fd);
	if (ret < 0)
		return ret;

	int now[2] = {0, 0};
	int size[2] = {0, 0};
	const int want[2] = {floor->snd, floor->rcv};
	for (int i = 0; i < 2; i++) {
		if (want[i] == 0)
			continue;
		ret = buffer::get_size(fd, i, &now[i]);
		if (ret < 0)
			return ret;
		if (now[i] < want[i])
			size[i] = want[i];
	}

	struct sockbuf_report local;
	struct sockbuf_report *rep = report ? report : &local;
	if (size[0] || size[1]) {
		ret = set_initial(fd, size, flags, rep, exec::reserve_amount(want[0], want[1]));
		if (ret < 0)
			return ret;
	} else if (flags & SOCKBUF_F_RESERVE_MEM) {
		// Nothing to raise, but the reservation is asked for: an accepted
		// socket at its listener's sizes holds none until it is made.
		op o{};
		o.fd = fd;
		o.protocol = IPPROTO_TCP;
		o.flags = flags;
		o.rep = rep;
		ret = probe::cached(&o.facts);
		if (ret < 0)
			return ret;
		ret = exec::reserve_only(o, exec::reserve_amount(want[0], want[1]));
		if (ret < 0)
			return ret;
	} else {
		// Nothing read tells a raw socket of protocol TCP yet.
		ret = validate::tcp_type(fd, -1);
		if (ret < 0)
			return ret;
		exec::clear_report(rep);
	}
	for (int i = 0; i < 2; i++) {
		struct sockbuf_dir_report &d = i == 0 ? rep->snd : rep->rcv;
		if (want[i] == 0 || size[i] != 0)
			continue;
		d.strategy = SOCKBUF_STRAT_HELD;
		d.requested = want[i];
		d.effective = now[i];
		d.floor = want[i];
	}
	return 0;
}

} // extern "C"
