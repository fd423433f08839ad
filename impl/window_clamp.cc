// SPDX-License-Identifier: MIT
// The window clamps the buffer options leave behind, found and cleared.
#include "window_clamp.h"

#include "sys.h"

#include <cerrno>
#include <netinet/in.h>
#include <netinet/tcp.h>

namespace sockbuf::window_clamp
{

int read(int fd, int *out)
{
	return sys::get_int(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, out);
}

int undo(op &o, int before)
{
	int after = before;
	int ret = read(o.fd, &after);
	if (ret < 0 || before != 0 || after == 0)
		return ret;
	ret = sys::set_int(o.fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, 0);
	if (ret == -EINVAL) { // past TCP_CLOSE: a listener
		o.rep->flags |= SOCKBUF_R_WINDOW_CLAMPED;
		return 0;
	}
	return ret;
}

} // namespace sockbuf::window_clamp
