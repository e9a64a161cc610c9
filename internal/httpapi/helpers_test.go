package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// env is the test's database (pgtest.EngineDB, shared with the broker
// tests) under this package's short names.
type env struct {
	*pgtest.EngineDB
	t    *testing.T
	dsn  string
	conn *pgx.Conn
}

// broker is one running server on the env's database.
type brokerT struct {
	t   *testing.T
	srv *httpapi.Server
	ts  *httptest.Server
	// token, when set, is sent as the bearer token.
	token string
}

func setup(t *testing.T) *env {
	t.Helper()
	d := pgtest.NewEngineDB(t)
	return &env{EngineDB: d, t: t, dsn: d.DSN, conn: d.Conn}
}

func ctxT(t testing.TB) context.Context { return pgtest.Ctx(t) }

func (e *env) pool() *pgxpool.Pool {
	e.t.Helper()
	p, err := db.NewPool(ctxT(e.t), config.Connection{DSN: e.dsn, ConnectTimeout: 10 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(p.Close)
	return p
}

// start runs a broker on the env's database with cfg (Pool and Conn set
// here) behind an httptest server.
func (e *env) start(cfg httpapi.Config) *brokerT {
	e.t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = e.pool()
	}
	cfg.Conn = config.Connection{DSN: e.dsn, ConnectTimeout: 10 * time.Second}
	if os.Getenv("PGQUE_TEST_HOTLIST") == "1" && cfg.Candidates == nil {
		// The whole suite with wildcard pops through the hot-list.
		cfg.HotList = true
	}
	srv, err := httpapi.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := srv.StartBackground(ctxT(e.t)); err != nil {
		e.t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ts.CloseClientConnections()
		_ = srv.Stop(ctx)
		ts.Close()
	})
	return &brokerT{t: e.t, srv: srv, ts: ts}
}

func (e *env) int(sql string, args ...any) int64 { e.t.Helper(); return e.Int(sql, args...) }
func (e *env) exec(sql string, args ...any)      { e.t.Helper(); e.Exec(sql, args...) }
func (e *env) events(queue string) int64         { e.t.Helper(); return e.Events(queue) }

// do sends a request; body is JSON-encoded unless it is a string or []byte.
func (b *brokerT) do(method, path string, body any) (int, []byte, http.Header) {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctxT(b.t), method, b.ts.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, out, resp.Header
}

// must sends a request and fails unless the status is want; it decodes
// the JSON answer into v (when not nil).
func (b *brokerT) must(want int, method, path string, body any, v any) []byte {
	b.t.Helper()
	code, out, _ := b.do(method, path, body)
	if code != want {
		b.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, out)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			b.t.Fatalf("%s %s: decoding %s: %v", method, path, out, err)
		}
	}
	return out
}

type pushRes struct {
	Index         int    `json:"index"`
	MessageID     string `json:"message_id"`
	TransactionID string `json:"transaction_id"`
	QueueName     string `json:"queueName"`
	Status        string `json:"status"`
}

type msg struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Data            json.RawMessage `json:"data"`
	CreatedAt       string          `json:"createdAt"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
}

type popRes struct {
	Success           bool   `json:"success"`
	Queue             string `json:"queue"`
	Partition         string `json:"partition"`
	PartitionID       string `json:"partitionId"`
	LeaseID           string `json:"leaseId"`
	ConsumerGroup     string `json:"consumerGroup"`
	PartitionsClaimed int    `json:"partitionsClaimed"`
	Messages          []msg  `json:"messages"`
}

type ackRes struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Noop          bool    `json:"noop"`
}

func item(queue, partition string, payload any, txn string) map[string]any {
	m := map[string]any{"queue": queue, "payload": payload}
	if partition != "" {
		m["partition"] = partition
	}
	if txn != "" {
		m["transactionId"] = txn
	}
	return m
}

func (b *brokerT) push(items ...map[string]any) []pushRes {
	b.t.Helper()
	var out []pushRes
	b.must(http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": items}, &out)
	return out
}

// pop pops; it returns nil on 204.
func (b *brokerT) pop(path string) *popRes {
	b.t.Helper()
	code, out, h := b.do("GET", path, nil)
	switch code {
	case http.StatusNoContent:
		if len(out) != 0 || h.Get("Content-Length") != "" {
			b.t.Fatalf("204 with a body or Content-Length: %q %q", out, h.Get("Content-Length"))
		}
		return nil
	case http.StatusOK:
		var p popRes
		if err := json.Unmarshal(out, &p); err != nil {
			b.t.Fatal(err)
		}
		return &p
	}
	b.t.Fatalf("GET %s: %d %s", path, code, out)
	return nil
}

func (b *brokerT) ack(group string, acks ...map[string]any) []ackRes {
	b.t.Helper()
	var out []ackRes
	b.must(http.StatusOK, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks}, &out)
	return out
}

func ackOf(m msg, status string) map[string]any {
	return map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": status}
}

func payloadN(m msg) int {
	var v struct{ N int }
	_ = json.Unmarshal(m.Data, &v)
	return v.N
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
func jsonUnmarshal(b []byte, v any) error         { return json.Unmarshal(b, v) }

// grepMetrics keeps the pgque_ lines of a metrics page.
func grepMetrics(page []byte) string {
	var out []string
	for _, l := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(l, "pgque_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// holdTickLock takes queue qid's tick lock (advisory (1885827446, qid), the
// lock every ticker of the queue takes) in a transaction of its own and
// returns it; rolling it back (at cleanup at the latest) releases the lock.
func (e *env) holdTickLock(t *testing.T, qid int64) pgx.Tx {
	t.Helper()
	ctx := ctxT(t)
	holder, err := e.pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock(1885827446, $1::int)`, qid); err != nil {
		t.Fatal(err)
	}
	return holder
}
