// SPDX-License-Identifier: MIT
// A TCP server that does what Go programs do to "make the window bigger":
// SO_RCVBUF on the listener (through ListenConfig.Control) and
// SetReadBuffer on the accepted connection, both through Go's own system
// calls, never libc's setsockopt.  Built at test time with CGO_ENABLED=0
// (static) and =1 (dynamic, cgo).
//
// usage: bufserver ADDR:PORT BYTES SIZE
// Prints "listening pid=P readback=R" (the listener's SO_RCVBUF read back
// after the request), then "received N crc32=HEX fd=F readback=R" once
// BYTES have arrived on the accepted connection, and exits when standard
// input closes or gives a line (so the socket can be inspected first).
package main

import (
	"bufio"
	"context"
	"hash/crc32"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
)

func rcvbuf(fd uintptr) int {
	v, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	if err != nil {
		return -1
	}
	return v
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: bufserver ADDR:PORT BYTES SIZE")
		os.Exit(2)
	}
	total, _ := strconv.ParseInt(os.Args[2], 10, 64)
	size, _ := strconv.Atoi(os.Args[3])
	var setErr error
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			setErr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", os.Args[1])
	if err != nil || setErr != nil {
		fmt.Fprintln(os.Stderr, "listen:", err, setErr)
		os.Exit(1)
	}
	lraw, _ := ln.(*net.TCPListener).SyscallConn()
	lread := -1
	lraw.Control(func(fd uintptr) { lread = rcvbuf(fd) })
	fmt.Printf("listening pid=%d readback=%d\n", os.Getpid(), lread)
	conn, err := ln.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, "accept:", err)
		os.Exit(1)
	}
	tc := conn.(*net.TCPConn)
	if err := tc.SetReadBuffer(size); err != nil {
		fmt.Fprintln(os.Stderr, "SetReadBuffer:", err)
		os.Exit(1)
	}
	raw, _ := tc.SyscallConn()
	fd, cread := -1, -1
	raw.Control(func(f uintptr) { fd = int(f); cread = rcvbuf(f) })
	h := crc32.NewIEEE()
	n, err := io.CopyN(h, tc, total)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read:", err)
		os.Exit(1)
	}
	fmt.Printf("received %d crc32=%08x fd=%d readback=%d\n", n, h.Sum32(), fd, cread)
	bufio.NewReader(os.Stdin).ReadString('\n')
	conn.Close()
	ln.Close()
}
