package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestConnPoolKeepAlive: requests reuse one connection, see the answer's
// status, Server-Timing and body (plain and chunked), open a new
// connection after an answer that closes, and a cancelled request returns
// at once without giving its connection back.
func TestConnPoolKeepAlive(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/push" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request line", http.StatusBadRequest)
			return
		}
		switch string(b) {
		case "close":
			w.Header().Set("Connection", "close")
		case "chunked":
			w.WriteHeader(http.StatusCreated)
			w.(http.Flusher).Flush() // no Content-Length: chunked
			w.Write([]byte("chunk-1,"))
			w.Write([]byte("chunk-2"))
			return
		case "slow":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		w.Header().Set("Server-Timing", "db;dur=1.5, park;dur=2")
		w.WriteHeader(http.StatusCreated)
		w.Write(append([]byte("echo:"), b...))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	p, err := newConnPool(srv.URL, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.closeIdle()
	ctx := context.Background()
	for i := range 5 {
		a, err := p.do(ctx, "POST", "/api/v1/push", []byte(`{"n":1}`))
		if err != nil || a.status != http.StatusCreated || a.timing != (serverTiming{db: 1.5, park: 2}) || string(a.body) != `echo:{"n":1}` {
			t.Fatalf("post %d: %+v %q %v", i, a, a.body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 sequential posts used %d connections, want 1 (keep-alive)", n)
	}
	a, err := p.do(ctx, "POST", "/api/v1/push", []byte("chunked"))
	if err != nil || a.status != http.StatusCreated || string(a.body) != "chunk-1,chunk-2" {
		t.Fatalf("chunked: %d %q %v", a.status, a.body, err)
	}
	if _, err := p.do(ctx, "POST", "/api/v1/push", []byte("close")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.do(ctx, "POST", "/api/v1/push", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("after an answer with Connection: close: %d connections, want 2", n)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = p.do(cctx, "POST", "/api/v1/push", []byte("slow"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 5*time.Second {
		t.Fatalf("cancelled post: %v after %s, want a deadline error at once", err, time.Since(t0))
	}
	if n := len(p.idle); n != 0 {
		t.Fatalf("%d idle connections after the aborted post, want 0 (the broken one closed)", n)
	}
	if _, err := newConnPool("https://x", 1); err == nil || !strings.Contains(err.Error(), "http://") {
		t.Fatalf("https base: %v, want an error", err)
	}
}
