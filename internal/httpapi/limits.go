package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// Resource limits of the HTTP server (docs/reference/http.md "Limits").
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request (headers and
	// body): a 64 MiB body needs ~1 MiB/s.
	DefaultReadTimeout = 60 * time.Second
	DefaultIdleTimeout = 120 * time.Second
	// DefaultBodyBudget bounds the request bodies in flight, charged
	// bodyCost each: two bodies of the largest size at once.
	DefaultBodyBudget = 2 * bodyCostFactor * DefaultBodyLimit
	// DefaultPushMaxItems bounds the items of one push (or of the pushes
	// of one transaction): 10,000 items with transactionIds commit in a
	// few seconds, well within the 30 s statement deadline.
	DefaultPushMaxItems = 10000
	// bodyCostFactor: a request holds this many times its body size of the
	// budget while it runs - the body, its decoded values, the statement's
	// parameters.
	bodyCostFactor = 4
	// connReserve is what --max-connections (auto) leaves of the open-file
	// limit besides the pool's connections: listeners, the LISTEN and
	// ticker connections, log files.
	connReserve = 64
)

func bodyCost(n int64) int64 { return n * bodyCostFactor }

// budget is a byte budget shared by the requests in flight.
type budget struct {
	mu        sync.Mutex
	cap, used int64
}

func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.cap {
		return false
	}
	b.used += n
	return true
}

func (b *budget) put(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// errBusy answers a request the body budget cannot take now: 503 with
// Retry-After.
func (s *Server) errBusy() error {
	return &apiError{status: http.StatusServiceUnavailable, retryAfter: 1,
		msg: fmt.Sprintf("the broker holds its limit of request bodies in flight (--body-budget %d bytes); retry in a moment", s.cfg.BodyBudget)}
}

func (s *Server) errTooLarge() error {
	return &apiError{status: http.StatusRequestEntityTooLarge,
		msg: fmt.Sprintf("request body too large (--body-limit %d bytes)", s.cfg.BodyLimit)}
}

// readBody reads the whole request body into memory within the body
// limit and budget, and returns what it took of the budget (to give back
// when the request ends). The budget is charged as the body arrives, a
// MiB at a time (a body sent slowly holds only what it sent), each step
// before it is read.
func (s *Server) readBody(r *http.Request) ([]byte, int64, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, 0, nil
	}
	if r.ContentLength > s.cfg.BodyLimit {
		return nil, 0, s.errTooLarge()
	}
	const step = 1 << 20
	var held int64
	var buf bytes.Buffer
	for {
		n := int64(step)
		if r.ContentLength > 0 {
			n = min(n, r.ContentLength-int64(buf.Len())+1) // +1: see the EOF
		}
		if !s.bodies.take(bodyCost(n)) {
			return nil, held, s.errBusy()
		}
		held += bodyCost(n)
		got, err := io.CopyN(&buf, r.Body, n)
		if int64(buf.Len()) > s.cfg.BodyLimit {
			return nil, held, s.errTooLarge()
		}
		if err == io.EOF || (err == nil && got < n) {
			return buf.Bytes(), held, nil
		}
		if err != nil {
			return nil, held, badRequest("bad body: reading it: " + err.Error())
		}
	}
}

// checkText refuses what PostgreSQL cannot store in text or jsonb, or
// would store changed: invalid UTF-8 (Go's JSON decoder turns it into
// U+FFFD) and NUL.
func checkText(what, v string) error {
	if !utf8.ValidString(v) {
		return badRequest(what + " is not valid UTF-8")
	}
	if i := bytes.IndexByte([]byte(v), 0); i >= 0 {
		return badRequest(what + " contains a NUL byte (PostgreSQL text cannot hold it)")
	}
	return nil
}

// checkRequestText applies checkText to the path, the query and the body
// of every request; in the body, to the JSON escape \u0000 too (jsonb
// refuses it).
func checkRequestText(r *http.Request, body []byte) error {
	if err := checkText("the path", r.URL.Path); err != nil {
		return err
	}
	// Without a percent escape the query's keys and values are pieces of
	// the raw query (split at ASCII bytes, '+' read as a space): when it
	// passes, so do they, and it need not be parsed here.
	if raw := r.URL.RawQuery; strings.IndexByte(raw, '%') >= 0 || checkText("the query", raw) != nil {
		for k, vs := range r.URL.Query() {
			for _, v := range vs {
				if err := checkText("query parameter "+strconv.Quote(k), v); err != nil {
					return err
				}
			}
		}
	}
	if len(body) == 0 {
		return nil
	}
	if !utf8.Valid(body) {
		return badRequest("bad body: not valid UTF-8")
	}
	if off := jsonNUL(body); off >= 0 {
		return badRequest(fmt.Sprintf("bad body: a JSON string holds \\u0000 (NUL) at byte %d; PostgreSQL cannot store it in text or jsonb", off))
	}
	return nil
}

// jsonNUL finds the escape \u0000 inside a JSON string of body (an
// escaped backslash followed by u0000 is not one): its byte offset, or -1.
// A raw NUL byte is invalid JSON and left to the decoder.
func jsonNUL(body []byte) int {
	if !bytes.Contains(body, []byte(`\u0000`)) {
		return -1
	}
	in := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\':
			if bytes.HasPrefix(body[i:], []byte(`\u0000`)) {
				return i
			}
			i++ // skip the escaped character
		}
	}
	return -1
}

// tenantSepRune is tenantSep as a rune.
const tenantSepRune = '\u241f'

// checkName is the one rule on names - queue, partition, consumer group,
// namespace, task - at every route that stores or reads them: valid
// UTF-8 without control characters (NUL included) and without U+241F
// (the tenant separator), and addressable in a URL path: not "." or ".."
// (Go's ServeMux, and every client's URL resolver, treat those as dot
// segments: a pop of queue ".." was redirected to /api/v1/pop). Any other
// name is reachable with its path segment escaped (url.PathEscape,
// encodeURIComponent). Length rules are the SQL's. An empty name is the
// caller's business (absent or default).
func checkName(field, name string) error {
	if name == "" {
		return nil
	}
	if !utf8.ValidString(name) {
		return badRequest(field + " is not valid UTF-8")
	}
	if name == "." || name == ".." {
		return badRequest(fmt.Sprintf("%s %q cannot be addressed in a URL path (a dot segment); choose another name", field, name))
	}
	for _, c := range name {
		switch {
		case c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0):
			return badRequest(fmt.Sprintf("%s must not contain control characters (found %U)", field, c))
		case c == tenantSepRune:
			return badRequest(field + " must not contain U+241F")
		}
	}
	return nil
}

// connLimiter bounds the open connections of the listener below the
// open-file limit, so that accept never fails for lack of descriptors
// (connections holding a request half-sent used to exhaust them: `accept:
// too many open files`). At the bound, a new connection evicts the
// connection that waited longest without a request being served - one
// sending its headers or body slowly, or idle between requests - or, when
// every connection is busy (parked pops, requests running), is answered
// 503 and closed.
type connLimiter struct {
	net.Listener
	max     int
	log     *slog.Logger
	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	evicted atomic.Int64
	refused atomic.Int64
}

type trackedConn struct {
	net.Conn
	l *connLimiter
	// since: when it started waiting (accepted, or idle after a request);
	// busy: a request of it is read and being served.
	since atomic.Int64
	busy  atomic.Bool
	once  sync.Once
}

func newConnLimiter(ln net.Listener, max int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, log: log, conns: map[*trackedConn]struct{}{}}
}

// autoMaxConns is the open-file limit less the pool's connections and a
// reserve.
func autoMaxConns(poolConns int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<20 {
		return 1 << 20
	}
	return max(16, int(rl.Cur)-poolConns-connReserve)
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		tc.since.Store(time.Now().UnixNano())
		l.mu.Lock()
		var victim *trackedConn
		if len(l.conns) >= l.max {
			for oc := range l.conns {
				if !oc.busy.Load() && (victim == nil || oc.since.Load() < victim.since.Load()) {
					victim = oc
				}
			}
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 52\r\n\r\n"+`{"error":"too many connections; retry in a moment"}`+"\n")
				_ = c.Close()
				continue
			}
			delete(l.conns, victim)
		}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			_ = victim.Conn.Close()
		}
		return tc, nil
	}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// connState keeps the tracked connections' waiting state (http.Server's
// ConnState hook).
func connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle, http.StateNew:
		tc.busy.Store(false)
		tc.since.Store(time.Now().UnixNano())
	}
}

const connKey ctxKey = 2

// markBusy says the request's connection is being served (not evictable).
func markBusy(r *http.Request) {
	if tc, ok := r.Context().Value(connKey).(*trackedConn); ok {
		tc.busy.Store(true)
	}
}

func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey, c)
}
