//go:build linux

package main

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// sockIO reads and writes a TCP connection's non-blocking socket with raw
// system calls (RawConn: the runtime's poller still parks the goroutine
// until the socket is ready, and the connection's deadlines apply). The
// same read(2) and sendto(2) calls net.Conn makes, minus the runtime's
// system-call bookkeeping: every net.Conn call wakes the runtime's
// monitor thread (sysmon) from its sleep into 20 µs polling, and with
// GOMAXPROCS=1 sysmon then takes the P from a thread that stays in a call
// longer than its tick and starts another thread to run it. In the load
// client that monitor thread used 44 % of the process's CPU samples at
// 200 msg/s, nearly all of it in context switches; a JavaScript client's
// event loop makes the same calls with none of this.
type sockIO struct {
	rc syscall.RawConn
}

// newSockIO returns c's socket as a sockIO (c itself when it has none).
func newSockIO(c net.Conn) io.ReadWriter {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &sockIO{rc: rc}
}

func (s *sockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n uintptr
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until readable, then again
			}
			return true
		}
	})
	switch {
	case err != nil: // a deadline, or the connection closed
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

func (s *sockIO) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written),
				syscall.MSG_NOSIGNAL, 0, 0)
			switch e {
			case 0:
				written += int(n)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until writable, then again
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	return written, err
}
