// Package logbuf is a bytes.Buffer that is safe to read while other
// goroutines write to it: tests capture a command's or a server's log in
// one and assert on it while it still runs.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer collects writes under a mutex. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
