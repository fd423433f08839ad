// SPDX-License-Identifier: MIT
// The shim's and the supervisor's half of an initial size (stored.h).
#include "stored.h"

#include "buffer.h"
#include "exec.h"
#include "fd_serial.h"
#include "op.h"
#include "probe.h"
#include "strategy.h"

#include <algorithm>
#include <cerrno>

namespace sockbuf::stored
{

int keep_unlocked(int fd, const request &rq, struct sockbuf_report *rep)
{
	if (rq.dir != buffer::snd && rq.dir != buffer::rcv)
		return -EINVAL;
	probe::facts facts;
	int ret = probe::cached(&facts);
	if (ret < 0)
		return ret;
	if (!(facts.features & SOCKBUF_FEAT_BUF_LOCK) ||
	    (rq.dir == buffer::rcv && (facts.quirks & SOCKBUF_QUIRK_RCVBUF_CLAMPS_WINDOW)))
		return -EOPNOTSUPP;

	exec::clear_report(rep);
	struct sockbuf_dir_report &d = rq.dir == buffer::snd ? rep->snd : rep->rcv;
	d.requested = rq.size;
	d.strategy = rq.forced ? SOCKBUF_STRAT_FORCE_UNLOCK : SOCKBUF_STRAT_UNLOCK;
	d.locked = 1; // the program's call set the bit

	// The lock bits as the public calls clear them (the other direction's
	// kept and reported), one call per fd at a time.
	op o{};
	o.fd = fd;
	o.rep = rep;
	o.facts = facts;
	fd_serial::guard serial(fd);
	ret = strategy::clear_locks(o, buffer::dir_bit(rq.dir));
	if (ret < 0) {
		rep->flags |= SOCKBUF_R_PARTIAL;
		return ret;
	}
	if (rq.known_floor > 0) {
		d.floor = rq.known_floor;
		return 0;
	}
	// Read after the bit is clear: a forced size above the limits is
	// reported as the kernel now holds it (exec.cc, reread_forced()).
	ret = buffer::get_size(fd, rq.dir, &d.effective);
	if (ret < 0)
		return ret;
	d.floor = std::min(d.requested, d.effective);
	d.clamps |= buffer::clamps_after_setbuf(rq.size, d.effective);
	const int tcp_max = rq.dir == buffer::snd ? facts.tcp_wmem_max : facts.tcp_rmem_max;
	if (tcp_max > 0 && d.effective > tcp_max)
		d.clamps |= SOCKBUF_CLAMP_TCP_MEM_MAX;
	return 0;
}

} // namespace sockbuf::stored
