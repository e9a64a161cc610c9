package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// The harness's HTTP/1.1 client. Every request is written and its answer
// read on the caller's goroutine over a kept-alive connection: net/http's
// Transport hands each request to a writer and a reader goroutine per
// connection, and on this 2-core VM every such hand-off is a thread
// wake-up that cost more than the request's own work. The wire is what
// any HTTP/1.1 client sends: one request per call, keep-alive,
// Content-Length bodies, no pipelining; answers with a Content-Length or
// chunked bodies are read whole before the connection is reused, and an
// answer that says "Connection: close" (or has neither) ends it.

// httpConn is one kept-alive connection to a broker, used by one goroutine
// at a time.
type httpConn struct {
	host string // host:port
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	body []byte // the last answer's body, reused by the next request
	// until: the connection's deadline, renewed only when less than half of
	// reqTimeout is left (no timer change per request).
	until time.Time
}

// reqTimeout bounds a request (a long-polling pop waits ≤ 1 s): a broker
// that stops answering fails the request instead of hanging the harness.
const reqTimeout = time.Minute

// answer is a response: the status, the broker's Server-Timing entries the
// harness reads, and the body (valid until the connection's next request).
type answer struct {
	status int
	timing serverTiming
	body   []byte
}

// serverTiming holds the Server-Timing durations (ms) the broker sends: a
// push's and a pop's database time ("db") and a pop's time parked ("park").
type serverTiming struct {
	db, park float64
}

// hostOf checks that base is http://host:port and returns host:port.
func hostOf(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("want http://host:port, got %q", base)
	}
	return u.Host, nil
}

func dialConn(ctx context.Context, host string) (*httpConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	s := newSockIO(c)
	return &httpConn{host: host, c: c, br: bufio.NewReaderSize(s, 16<<10), bw: bufio.NewWriterSize(s, 16<<10)}, nil
}

func (h *httpConn) close() { _ = h.c.Close() }

// do sends one request (body nil: none) and reads the answer whole.
// reuse says whether the connection may carry another request; after an
// error it must be closed.
func (h *httpConn) do(method, path string, body []byte) (a answer, reuse bool, err error) {
	if now := time.Now(); h.until.Sub(now) < reqTimeout/2 {
		h.until = now.Add(reqTimeout)
		if err := h.c.SetDeadline(h.until); err != nil {
			return a, false, err
		}
	}
	w := h.bw
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(h.host)
	if body != nil {
		w.WriteString("\r\nContent-Type: application/json\r\nContent-Length: ")
		var n [20]byte
		w.Write(strconv.AppendInt(n[:0], int64(len(body)), 10))
	}
	w.WriteString("\r\n\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return a, false, err
	}
	return h.readAnswer(method == "HEAD")
}

var errBadAnswer = errors.New("malformed HTTP answer")

// readAnswer reads a status line, the headers and the body.
func (h *httpConn) readAnswer(head bool) (a answer, reuse bool, err error) {
	line, err := h.br.ReadSlice('\n')
	if err != nil {
		return a, false, err
	}
	// "HTTP/1.1 201 Created\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return a, false, fmt.Errorf("%w: status line %q", errBadAnswer, line)
	}
	a.status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return a, false, fmt.Errorf("%w: status line %q", errBadAnswer, line)
	}
	reuse = line[7] == '1' // HTTP/1.0 closes unless asked not to
	length, chunked := int64(-1), false
	for {
		line, err = h.br.ReadSlice('\n')
		if err != nil {
			return a, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return a, false, fmt.Errorf("%w: header %q", errBadAnswer, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			length, err = strconv.ParseInt(string(value), 10, 64)
			if err != nil || length < 0 {
				return a, false, fmt.Errorf("%w: Content-Length %q", errBadAnswer, value)
			}
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
			if !chunked {
				return a, false, fmt.Errorf("%w: Transfer-Encoding %q", errBadAnswer, value)
			}
		case asciiEqualFold(name, "connection"):
			if asciiEqualFold(value, "close") {
				reuse = false
			}
		case asciiEqualFold(name, "server-timing"):
			a.timing = parseServerTiming(value)
		}
	}
	h.body = h.body[:0]
	switch {
	case head || a.status == 204 || a.status == 304 || a.status < 200:
	case chunked:
		if err := h.readChunked(); err != nil {
			return a, false, err
		}
	case length >= 0:
		if int64(cap(h.body)) < length {
			h.body = make([]byte, 0, length)
		}
		h.body = h.body[:length]
		if _, err := io.ReadFull(h.br, h.body); err != nil {
			return a, false, err
		}
	default: // no length: the body runs to the end of the connection
		b := bytes.NewBuffer(h.body)
		if _, err := b.ReadFrom(h.br); err != nil {
			return a, false, err
		}
		h.body, reuse = b.Bytes(), false
	}
	a.body = h.body
	return a, reuse, nil
}

// readChunked appends a chunked body to h.body (trailers are skipped).
func (h *httpConn) readChunked() error {
	for {
		line, err := h.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: chunk size %q", errBadAnswer, line)
		}
		if n == 0 {
			for { // trailers, then the empty line
				line, err := h.br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		start := len(h.body)
		h.body = append(h.body, make([]byte, n)...)
		if _, err := io.ReadFull(h.br, h.body[start:]); err != nil {
			return err
		}
		if crlf, err := h.br.ReadSlice('\n'); err != nil || len(bytes.TrimRight(crlf, "\r\n")) != 0 {
			return fmt.Errorf("%w: chunk not followed by CRLF", errBadAnswer)
		}
	}
}

// asciiEqualFold compares b with the lower-case ASCII s, ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// parseServerTiming reads `name;dur=ms, ...` (the entries "db" and "park").
func parseServerTiming(h []byte) serverTiming {
	var t serverTiming
	for len(h) > 0 {
		var e []byte
		e, h, _ = bytes.Cut(h, []byte(","))
		name, params, _ := bytes.Cut(bytes.TrimSpace(e), []byte(";"))
		for len(params) > 0 {
			var p []byte
			p, params, _ = bytes.Cut(params, []byte(";"))
			v, ok := bytes.CutPrefix(bytes.TrimSpace(p), []byte("dur="))
			if !ok {
				continue
			}
			ms, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				continue
			}
			switch string(name) {
			case "db":
				t.db = ms
			case "park":
				t.park = ms
			}
		}
	}
	return t
}

// connPool holds idle connections to one broker for callers that share
// them (the throughput, wildcard and many-consumer cells).
type connPool struct {
	host string
	mu   sync.Mutex
	idle []*httpConn
	max  int
}

func newConnPool(base string, max int) (*connPool, error) {
	host, err := hostOf(base)
	if err != nil {
		return nil, fmt.Errorf("connPool: %w", err)
	}
	return &connPool{host: host, max: max}, nil
}

func (p *connPool) get(ctx context.Context) (*httpConn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		h := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return h, nil
	}
	p.mu.Unlock()
	return dialConn(ctx, p.host)
}

func (p *connPool) put(h *httpConn) {
	p.mu.Lock()
	if len(p.idle) < p.max {
		p.idle = append(p.idle, h)
		h = nil
	}
	p.mu.Unlock()
	if h != nil {
		h.close()
	}
}

func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, h := range idle {
		h.close()
	}
}

// do runs one request on a pooled connection and returns the answer with
// a copy of its body. ctx's end aborts it (the connection is then closed,
// not reused).
func (p *connPool) do(ctx context.Context, method, path string, body []byte) (answer, error) {
	h, err := p.get(ctx)
	if err != nil {
		return answer{}, err
	}
	stop := context.AfterFunc(ctx, func() { _ = h.c.SetDeadline(time.Unix(1, 0)) })
	a, reuse, err := h.do(method, path, body)
	if !stop() || err != nil || !reuse {
		h.close()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if err != nil {
			return answer{}, err
		}
		a.body = bytes.Clone(a.body)
		return a, nil
	}
	a.body = bytes.Clone(a.body)
	p.put(h)
	return a, nil
}
