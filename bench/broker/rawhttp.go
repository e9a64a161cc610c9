package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// connPool sends requests over kept-alive HTTP/1.1 connections to one
// broker, each request written and its answer read on the caller's
// goroutine. net/http's Transport hands every request to a writer and a
// reader goroutine per connection; on this 2-core VM each such hand-off is
// a thread wake-up, and the harness measured 0.27-0.30 ms of CPU per
// one-message push with it (a sixth of the latency cell's CPU per
// message) against the broker's 0.4. The wire is the same: one request per
// push, keep-alive, Content-Length bodies; http.ReadResponse parses the
// answer (chunked or not). A connection is reused only after its answer
// was read whole and did not ask to close.
type connPool struct {
	host string // host:port
	mu   sync.Mutex
	idle []*rawConn
	max  int
}

type rawConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

func newConnPool(base string, max int) (*connPool, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("connPool: want http://host:port, got %q", base)
	}
	return &connPool{host: u.Host, max: max}, nil
}

func (p *connPool) get(ctx context.Context) (*rawConn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		rc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return rc, nil
	}
	p.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.host)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 4096), bw: bufio.NewWriterSize(c, 4096)}, nil
}

func (p *connPool) put(rc *rawConn) {
	p.mu.Lock()
	if len(p.idle) < p.max {
		p.idle = append(p.idle, rc)
		rc = nil
	}
	p.mu.Unlock()
	if rc != nil {
		rc.c.Close()
	}
}

func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, rc := range idle {
		rc.c.Close()
	}
}

// post sends one POST of a JSON body to path and returns the status, the
// Server-Timing header and the body read whole. ctx's end aborts it (the
// connection is then closed, not reused).
func (p *connPool) post(ctx context.Context, path string, body []byte) (int, string, []byte, error) {
	rc, err := p.get(ctx)
	if err != nil {
		return 0, "", nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = rc.c.SetDeadline(time.Unix(1, 0)) })
	status, timing, raw, reuse, err := rc.roundTrip(p.host, path, body)
	if !stop() || err != nil || !reuse {
		rc.c.Close()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return status, timing, raw, err
	}
	p.put(rc)
	return status, timing, raw, nil
}

func (rc *rawConn) roundTrip(host, path string, body []byte) (status int, timing string, raw []byte, reuse bool, err error) {
	w := rc.bw
	w.WriteString("POST ")
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\nContent-Type: application/json\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(body)))
	w.WriteString("\r\n\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return 0, "", nil, false, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return 0, "", nil, false, err
	}
	raw, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, "", nil, false, err
	}
	return resp.StatusCode, resp.Header.Get("Server-Timing"), raw, !resp.Close, nil
}
