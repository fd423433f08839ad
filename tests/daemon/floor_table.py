# SPDX-License-Identifier: MIT
"""A floor table written by hand, in the library's layout
(impl/internal/floor_registry.h, version 1), and its registration with
sockbufd: "SBREG1" and the table's descriptor (SCM_RIGHTS) over the
daemon's registration socket, one int32_t back (0: served, or -errno).
The daemon's tests use it where the library would not do what they
need: a table for a socket its writer holds but did not size, one
forged for another process, one of thousands of floors.  Standard
library only, so that a script run as user nobody can import it
(child()).
"""
import fcntl
import os
import socket
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

HEADER = struct.Struct("=8sIIIIiiQIII12x")  # file_header (guard fields zero)
SLOT = struct.Struct("=IIQIiiI")  # file_slot
SLOTS = 8192  # slot_count
SIZE = HEADER.size + SLOTS * SLOT.size  # file_size
MESSAGE = struct.Struct("=8siiiI")  # registration_message
OWN, FOREIGN = 0, 1  # register_kind
BY_GUARD, BY_SHIM = 1, 2  # source
CHANGES = 48  # offset of file_header::changes


def child(body):
    """@body as a `python3 -c` script that can import this module (it
    runs as another user, from any directory)."""
    return f"import sys; sys.path.insert(0, {HERE!r})\n" + body


def start_time(pid):
    """Field 22 of /proc/PID/stat: the process's start in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def home(ino):
    """The slot where a writer puts the socket of inode @ino first."""
    return ((ino * 0x9E3779B97F4A7C15) % (1 << 64) >> 32) % SLOTS


def at(i):
    """The offset of slot @i in the file."""
    return HEADER.size + i * SLOT.size


def slot(ino, snd=0, rcv=0, who=BY_SHIM):
    """A slot (not mid-write, taken) with the floors of the socket of
    inode @ino, set by @who."""
    return SLOT.pack(2, 1, ino, who, snd, rcv, 0)


def header(pid, start, publisher=0, max_probe=0, changes=1):
    """The header of the table of process @pid (started at @start);
    @publisher: who writes it for @pid (0: @pid itself)."""
    return HEADER.pack(b"SBFLOOR1", 1, HEADER.size, SLOT.size, SLOTS, pid, publisher, start,
                       max_probe, 0, changes)


def new_memfd():
    """An empty own table, the way the library makes one: a memfd of the
    table's size, sealed against shrinking and growing."""
    fd = os.memfd_create("sockbuf-floors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, SIZE)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def own_table(ino, rcv):
    """This process's own table (new_memfd()) with one slot: the socket of
    inode @ino at receive floor @rcv, in its home slot.  Its descriptor."""
    fd = new_memfd()
    os.pwrite(fd, slot(ino, rcv=rcv), at(home(ino)))
    os.pwrite(fd, header(os.getpid(), start_time(os.getpid())), 0)
    return fd


def foreign_file(pid, ino, rcv):
    """A table this process publishes for process @pid, in /dev/shm under
    @pid's name, with one slot: the socket of inode @ino at receive
    floor @rcv, in its home slot.  Its descriptor and path."""
    start = start_time(pid)
    path = f"/dev/shm/sockbuf-floors.{pid}.{start}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.posix_fallocate(fd, 0, SIZE)
    os.pwrite(fd, slot(ino, rcv=rcv), at(home(ino)))
    os.pwrite(fd, header(pid, start, publisher=os.getpid()), 0)
    return fd, path


def offer(reg, fd, kind=OWN, target=0, timeout=5):
    """Connects to the registration socket @reg and sends the table at
    descriptor @fd (@kind, for @target if FOREIGN).  The connection, for
    answer(); OSError when the daemon cannot be reached."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.settimeout(timeout)
        c.connect(reg)
        socket.send_fds(c, [MESSAGE.pack(b"SBREG1\0\0", kind, fd, target, 0)], [fd])
    except OSError:
        c.close()
        raise
    return c


def answer(c):
    """The daemon's answer on connection @c (offer()): 0 or -errno."""
    return struct.unpack("=i", c.recv(4))[0]


def register(reg, fd, kind=OWN, target=0, timeout=5):
    """offer() and answer(), the connection closed after."""
    with offer(reg, fd, kind, target, timeout) as c:
        return answer(c)
