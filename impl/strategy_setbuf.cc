// SPDX-License-Identifier: MIT
// SO_*BUF and SO_*BUFFORCE: the lock, force-lock, unlock and force-unlock
// strategies share this sizing step.
#include "strategy.h"

#include "buffer.h"

#include <cerrno>

namespace sockbuf::strategy
{

namespace
{

// The request was cut by net.core.[wr]mem_max.  Retry with FORCE when the
// caller allows it and the process holds CAP_NET_ADMIN.
int try_force(op &o, int i, bool *forced)
{
	*forced = false;
	if (!o.has(SOCKBUF_FEAT_FORCE)) {
		o.rep->flags |= SOCKBUF_R_FORCE_DENIED;
		return 0;
	}
	int ret = buffer::set_size(o.fd, i, o.size[i], true);
	if (ret == -EPERM) { // capability dropped since the probe
		o.rep->flags |= SOCKBUF_R_FORCE_DENIED;
		return 0;
	}
	if (ret < 0)
		return ret;
	*forced = true;
	return buffer::get_size(o.fd, i, &o.dir(i).effective);
}

} // namespace

int setbuf(op &o, int i, bool unlocking)
{
	struct sockbuf_dir_report &d = o.dir(i);
	int ret = buffer::set_size(o.fd, i, o.size[i], false);
	if (ret < 0)
		return ret;
	o.changed = true;
	d.locked = 1;
	ret = buffer::get_size(o.fd, i, &d.effective);
	if (ret < 0)
		return ret;

	bool forced = false;
	if (d.effective < (o.size[i] & ~1) && (o.flags & SOCKBUF_F_ALLOW_FORCE)) {
		ret = try_force(o, i, &forced);
		if (ret < 0)
			return ret;
	}
	if (forced)
		d.strategy = unlocking ? SOCKBUF_STRAT_FORCE_UNLOCK : SOCKBUF_STRAT_FORCE_LOCK;
	else
		d.strategy = unlocking ? SOCKBUF_STRAT_UNLOCK : SOCKBUF_STRAT_LOCK;
	d.clamps |= buffer::clamps_after_setbuf(o.size[i], d.effective);
	return 0;
}

int clear_locks(op &o, int bits)
{
	int keep = 0;
	if (bits != SOCKBUF_BOTH) {
		// Only one direction unlocks: keep the other's bit as it is.
		int ret = buffer::get_lock(o.fd, &keep);
		if (ret < 0)
			return ret;
	}
	int ret = buffer::set_lock(o.fd, keep & ~bits);
	if (ret < 0)
		return ret;
	for (int i = 0; i < 2; i++) {
		if (bits & buffer::dir_bit(i))
			o.dir(i).locked = 0;
		else if (o.dir(i).strategy == SOCKBUF_STRAT_NONE)
			o.dir(i).locked = (keep & buffer::dir_bit(i)) ? 1 : 0;
	}
	return 0;
}

int leave_default(op &o, int i)
{
	struct sockbuf_dir_report &d = o.dir(i);
	d.strategy = SOCKBUF_STRAT_DEFAULT;
	o.rep->flags |= SOCKBUF_R_FALLBACK;
	return buffer::get_size(o.fd, i, &d.effective);
}

} // namespace sockbuf::strategy
