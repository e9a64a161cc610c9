package logbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWritesAllKept: writes from many goroutines, read while they
// run (under -race), all end up in the buffer.
func TestConcurrentWritesAllKept(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				_, _ = b.Write([]byte("x\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "x\n"); n != 800 {
		t.Fatalf("lines = %d, want 800", n)
	}
}
