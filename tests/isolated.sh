#!/bin/sh
# SPDX-License-Identifier: MIT
# isolated.sh COMMAND...: runs COMMAND in a mount namespace of its own,
# with a private tmpfs on /dev/shm and on the daemon's run directory
# (/run/sockbufd), so that tables and daemons of other tests (or a real
# sockbufd) can neither fail it nor be disturbed by it.  As not root, or
# where mount namespaces cannot be made, COMMAND runs as it is (its
# checks that need root skip).
if [ "$(id -u)" = 0 ] && [ -z "$SOCKBUF_TEST_ISOLATED" ] &&
	unshare --mount true 2>/dev/null; then
	SOCKBUF_TEST_ISOLATED=1
	export SOCKBUF_TEST_ISOLATED
	exec unshare --mount --propagation private sh -c '
		mount -t tmpfs -o mode=1777,size=64m sockbuf-test /dev/shm &&
		mkdir -p /run/sockbufd &&
		mount -t tmpfs -o mode=755,size=1m sockbuf-test /run/sockbufd &&
		exec "$@"' sh "$@"
fi
exec "$@"
