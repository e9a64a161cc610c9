//go:build !linux

package main

import (
	"io"
	"net"
)

// newSockIO returns c: raw system calls are used on Linux only
// (rawsock_linux.go).
func newSockIO(c net.Conn) io.ReadWriter { return c }
