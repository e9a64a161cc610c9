package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Slow request bodies are cut and cannot starve the broker of file
// descriptors: a real serve with 1,024 open files at most, 1,500
// connections that sent a push's headers and then nothing of their body.
// Before, nothing cut them and accept failed with "too many open files"
// (a push waited for as long as they stayed); now the connection cap
// (below the file limit) makes a new connection evict the longest-waiting
// unserved one, and --read-timeout cuts the others.
func TestServeSlowBodiesAreCut(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit not installed")
	}
	bin := buildPgquectl(t)
	wrapper := filepath.Join(t.TempDir(), "pgquectl-1024")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec prlimit --nofile=1024:1024 "+bin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const readTimeout = 3 * time.Second
	b := newSoakBroker(t, "A", wrapper, pgtest.NewDB(t))
	b.args = []string{"--read-timeout", readTimeout.String(), "--standby-ticker=false", "--hotlist=false"}
	b.start()
	client := &http.Client{Timeout: 30 * time.Second}
	push := func() (int, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := client.Post(b.url()+"/api/v1/push", "application/json",
			bytes.NewReader([]byte(`{"items":[{"queue":"q","payload":1}]}`)))
		if err != nil {
			return 0, time.Since(start)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	if code, _ := push(); code != http.StatusCreated {
		t.Fatalf("push before: %d", code)
	}

	const slow = 1500
	conns := make([]net.Conn, 0, slow)
	opened := time.Now()
	for range slow {
		c, err := net.DialTimeout("tcp", b.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v (after %d)", err, len(conns))
		}
		fmt.Fprintf(c, "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	t.Logf("%d slow connections opened in %v", slow, time.Since(opened))
	code, took := push()
	t.Logf("push among the slow connections: %d in %v", code, took)
	if code != http.StatusCreated || took >= readTimeout {
		t.Fatalf("push among %d slow connections: status %d after %v; want 201 before the read timeout (%v) cuts them", slow, code, took, readTimeout)
	}

	// Every slow connection is closed by the broker: evicted, or cut by
	// the read timeout (counted from its accept, which the ones waiting in
	// the listen backlog got late).
	var wg sync.WaitGroup
	var mu sync.Mutex
	open, latest := 0, time.Duration(0)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(3 * readTimeout))
			_, err := io.Copy(io.Discard, c)
			mu.Lock()
			defer mu.Unlock()
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
				return
			}
			latest = max(latest, time.Since(opened))
		}()
	}
	wg.Wait()
	t.Logf("slow connections closed by the broker within %v of opening", latest)
	if open > 0 {
		t.Fatalf("%d of %d slow connections still open %v after the read timeout", open, slow, 3*readTimeout)
	}
	if code, _ := push(); code != http.StatusCreated {
		t.Fatalf("push after: %d; log:\n%s", code, b.logTail())
	}
}
