// SPDX-License-Identifier: MIT
// The daemon labs' loopback connections (cut_publisher, fleet_judge,
// idle_publisher): a listener on 127.0.0.1, and connections to it whose
// sender is sized to a floor with sockbuf_set_initial_bufsize()
// (unlocked: the kernel may cut it) before it connects, its floor then
// published for sockbufd.
#pragma once

#include "floor_registry.h"

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>

namespace sockbuf::daemon_lab
{

// A listener on 127.0.0.1, a port of the kernel's choice, that queues
// @backlog connections; its address in @sa.  Its fd, or -1 (errno set).
inline int loopback_listener(int backlog, struct sockaddr_in *sa)
{
	const int l = socket(AF_INET, SOCK_STREAM, 0);
	*sa = {};
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(*sa);
	if (l < 0 || bind(l, (sockaddr *)sa, sizeof(*sa)) || listen(l, backlog) ||
	    getsockname(l, (sockaddr *)sa, &len))
		return -1;
	return l;
}

// A connection to listener @l at @sa, its sender sized to @floor first:
// 0 with the sender in @snd, the accepted end in @rcv and the floor the
// call stored in @fl (the buffer itself has grown since, at connect), or
// -1 (errno set).
inline int floored_pair(int l, const struct sockaddr_in &sa, int floor, int *snd, int *rcv,
			struct sockbuf_floor *fl)
{
	struct sockbuf_report rep;
	*snd = socket(AF_INET, SOCK_STREAM, 0);
	if (*snd < 0 || sockbuf_set_initial_bufsize(*snd, floor, 0, 0, &rep) != 0 ||
	    connect(*snd, (const sockaddr *)&sa, sizeof(sa)) != 0 ||
	    (*rcv = accept(l, nullptr, nullptr)) < 0)
		return -1;
	sockbuf_report_floor(&rep, fl);
	return 0;
}

// Publishes sender @snd's floor @floor in this process's floor table, as
// the shim would (no guard of its own keeps it).  0 with its inode in
// *@ino (if given), or -1 (errno set).
inline int publish_sender(int snd, int floor, uint64_t *ino = nullptr)
{
	struct stat st;
	if (fstat(snd, &st) != 0)
		return -1;
	if (ino)
		*ino = uint64_t(st.st_ino);
	const int err = registry::publish(st.st_ino, floor, 0, registry::by_shim);
	if (err < 0) {
		errno = -err;
		return -1;
	}
	return 0;
}

} // namespace sockbuf::daemon_lab
