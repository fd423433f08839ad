// SPDX-License-Identifier: MIT
// Receive buffers on kernels without SO_BUF_LOCK: tcp_set_rcvlowat() raises
// an unlocked sk_rcvbuf to hold twice the mark and leaves it unlocked.  The
// mark also decides when reads wake up, so the caller's mark is put back.
//
// Before kernel commit 21b29e74ffe5 (6.18, backported to 6.6 stable) the
// raise also sets tp->window_clamp to the mark.  On a socket that has not
// connected yet, tcp_select_initial_window() would then choose the window
// scale from that clamp and cap the connection near the initial size for
// its life: window_clamp::undo() takes it away again.
#include "strategy.h"

#include "buffer.h"
#include "sys.h"
#include "window_clamp.h"

#include <sys/socket.h>

namespace sockbuf::strategy
{

int rcvlowat(op &o)
{
	struct sockbuf_dir_report &d = o.rep->rcv;
	int saved = 1, clamp = 0;
	int ret = sys::get_int(o.fd, SOL_SOCKET, SO_RCVLOWAT, &saved);
	if (ret == 0)
		ret = window_clamp::read(o.fd, &clamp);
	if (ret < 0)
		return ret;
	ret = sys::set_int(o.fd, SOL_SOCKET, SO_RCVLOWAT, o.size[1] / 2);
	if (ret < 0)
		return ret;
	o.changed = true;
	ret = sys::set_int(o.fd, SOL_SOCKET, SO_RCVLOWAT, saved);
	if (ret == 0)
		ret = window_clamp::undo(o, clamp);
	if (ret == 0)
		ret = buffer::get_size(o.fd, buffer::rcv, &d.effective);
	if (ret < 0)
		return ret;

	d.strategy = SOCKBUF_STRAT_RCVLOWAT;
	d.clamps |= buffer::clamps_after_rcvlowat(o.size[1], d.effective, o.facts.tcp_rmem_max);
	// Without SO_BUF_LOCK the bit cannot be read.  Reaching the request
	// exactly means tcp_set_rcvlowat() raised it, which it does only for
	// unlocked buffers; anything else stays unknown.
	d.locked = d.effective == (o.size[1] & ~1) ? 0 : -1;
	return 0;
}

} // namespace sockbuf::strategy
