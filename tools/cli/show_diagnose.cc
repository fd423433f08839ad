// SPDX-License-Identifier: MIT
#include "show_diagnose.h"

#include "floor_registry.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <cmath>
#include <netinet/tcp.h>

namespace sockbuf::cli::show
{

namespace
{

std::string human(double v, const char *suffix)
{
	const char *units[] = {"bytes", "KB", "MB", "GB", "TB"};
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		return fmt::format("{:.0f} {}{}", v, units[0], suffix);
	// Whole numbers stay whole ("256 KB"); others get one decimal.
	if (std::fabs(v - std::round(v)) < 0.05)
		return fmt::format("{:.0f} {}{}", v, units[u], suffix);
	return fmt::format("{:.1f} {}{}", v, units[u], suffix);
}

std::string human_rtt(double seconds)
{
	if (seconds >= 0.001)
		return fmt::format("{:.0f} ms", seconds * 1000);
	return fmt::format("{:.2f} ms", seconds * 1000);
}

bool connected(const diag::socket_info &si)
{
	return si.state != TCP_LISTEN && si.state != TCP_CLOSE && si.state != TCP_SYN_SENT;
}

// "at 50 ms RTT this caps the connection near 5 MB/s", with the measured
// RTT first when there is one.
std::string cap_phrase(double size, const diag::socket_info &si)
{
	double measured = si.has_tcp_info && connected(si) && si.rtt_us > 0 ? si.rtt_us / 1e6 : 0;
	std::string text;
	if (measured > 0) {
		text = fmt::format("at the measured {} RTT this caps the connection near {}",
				   human_rtt(measured), human_rate(size / measured));
		if (measured < reference_rtt_s / 2)
			text += fmt::format(", at {} RTT near {}", human_rtt(reference_rtt_s),
					    human_rate(size / reference_rtt_s));
		return text;
	}
	return fmt::format("at {} RTT this caps {} near {}", human_rtt(reference_rtt_s),
			   si.state == TCP_LISTEN ? "every accepted connection" : "the connection",
			   human_rate(size / reference_rtt_s));
}

std::string could_reach(const char *sysctl, int cap)
{
	if (cap <= 0)
		return "";
	return fmt::format("; unlocked it could reach {} = {}", sysctl, human_size(cap));
}

} // namespace

int floor_depth(const shown_socket &s, int d)
{
	const int floor = d == SOCKBUF_SND ? s.floor_snd : s.floor_rcv;
	const int64_t size = d == SOCKBUF_SND ? s.info.sndbuf : s.info.rcvbuf;
	if (floor <= 0 || size < 0 || size >= floor)
		return 0;
	return int(floor - size);
}

std::string floor_by_text(uint32_t who)
{
	const bool guard = who & registry::by_guard, listener = who & registry::by_listener,
		   shim = (who & registry::by_shim) || listener;
	const char *by = guard && shim ? "guard+shim" : guard ? "guard" : shim ? "shim" : "unknown";
	return listener ? std::string(by) + ", from its listener" : by;
}

std::string human_size(double bytes)
{
	return human(bytes, "");
}

std::string human_rate(double bytes_per_s)
{
	return human(bytes_per_s, "/s");
}

diagnosis diagnose(const shown_socket &s, const net_limits &limits)
{
	diagnosis d;
	const diag::socket_info &si = s.info;

	for (int dir : {SOCKBUF_SND, SOCKBUF_RCV}) {
		const int depth = floor_depth(s, dir);
		if (depth == 0)
			continue;
		d.problem = true;
		d.lines.push_back(fmt::format(
		    "{} buffer {} bytes is {} bytes below its floor of {} bytes (set by the {})",
		    dir == SOCKBUF_SND ? "send" : "receive",
		    dir == SOCKBUF_SND ? si.sndbuf : si.rcvbuf, depth,
		    dir == SOCKBUF_SND ? s.floor_snd : s.floor_rcv, floor_by_text(s.floor_by)));
	}

	// A locked direction, receive first: what its size caps, and what
	// autotuning could reach without the lock.
	auto locked = [&](int dir, const char *name, double size, const char *sysctl, int cap) {
		if (s.lock <= 0 || !(s.lock & dir) || size <= 0)
			return;
		d.problem = true;
		d.lines.push_back(fmt::format("{} buffer locked at {}: {}{}", name,
					      human_size(size), cap_phrase(size, si),
					      could_reach(sysctl, cap)));
	};
	locked(SOCKBUF_RCV, "receive", double(si.rcvbuf), "tcp_rmem[2]", limits.tcp_rmem[2]);
	locked(SOCKBUF_SND, "send", double(si.sndbuf), "tcp_wmem[2]", limits.tcp_wmem[2]);
	// The window scale is fixed by the handshake: a small one caps the
	// receive window for the connection's life, whatever the buffer does.
	if (si.has_tcp_info && connected(si) && si.rcv_wscale >= 0 && limits.tcp_rmem[2] > 0) {
		double max_window = 65535.0 * double(1u << si.rcv_wscale);
		if (max_window * 2 < limits.tcp_rmem[2]) {
			d.problem = true;
			d.lines.push_back(fmt::format(
			    "window scale {} (fixed at the handshake) limits the receive window to "
			    "{} for the connection's life: size buffers before listen()/connect()",
			    si.rcv_wscale, human_size(max_window)));
		}
	}
	if (s.lock == 0) {
		d.lines.push_back(fmt::format(
		    "unlocked: autotuning on (receive {} of at most {}, send {} of at most {})",
		    human_size(double(si.rcvbuf)), human_size(limits.tcp_rmem[2]),
		    human_size(double(si.sndbuf)), human_size(limits.tcp_wmem[2])));
	} else if (s.lock < 0) {
		d.lines.push_back(fmt::format("lock bits unknown ({}): cannot tell whether "
					      "autotuning is on",
					      s.lock_note.empty() ? "not readable" : s.lock_note));
	} else if (!(s.lock & SOCKBUF_RCV) || !(s.lock & SOCKBUF_SND)) {
		d.lines.push_back(fmt::format("{} buffer unlocked: autotuning on for it",
					      (s.lock & SOCKBUF_RCV) ? "send" : "receive"));
	}
	if (si.rmem_alloc > 0 && si.rcvbuf > 0 && si.rmem_alloc * 10 >= si.rcvbuf * 9)
		d.lines.push_back(fmt::format("receive queue nearly full ({} of {}): the "
					      "application reads slower than data arrives",
					      human_size(double(si.rmem_alloc)),
					      human_size(double(si.rcvbuf))));
	return d;
}

} // namespace sockbuf::cli::show
