package httpapi_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/logbuf"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

var secret = []byte("test-secret")

func token(t *testing.T, key []byte, method jwt.SigningMethod, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAuthRoles(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{AuthSecret: secret})
	admin := token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin"})

	type call struct {
		method, path, body string
	}
	push := call{"POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`}
	pop := call{"GET", "/api/v1/pop/queue/q?autoAck=true", ""}
	list := call{"GET", "/api/v1/resources/queues", ""}
	del := call{"DELETE", "/api/v1/resources/queues/none", ""}
	ack := call{"POST", "/api/v1/ack", `{"transactionId":"x","partitionId":"y"}`}
	// want[role] = status per call (push, pop, list, delete, ack); the
	// delete of a queue that does not exist is 200 (deleted: false).
	want := map[string][5]int{
		"read-only":  {403, 403, 200, 403, 403},
		"write-only": {201, 403, 403, 403, 403},
		"read-write": {201, 200, 200, 403, 200},
		"admin":      {201, 200, 200, 200, 200},
		"nobody":     {403, 403, 403, 403, 403},
	}
	for _, role := range []string{"read-only", "write-only", "read-write", "admin", "nobody"} {
		b.token = token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": role})
		for i, c := range []call{push, pop, list, del, ack} {
			var body any
			if c.body != "" {
				body = c.body
			}
			code, out, _ := b.do(c.method, c.path, body)
			if code != want[role][i] {
				t.Errorf("%s: %s %s: %d %s, want %d", role, c.method, c.path, code, out, want[role][i])
			}
		}
	}
	// roles as a list.
	b.token = token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"roles": []string{"read-only", "write-only"}})
	b.must(201, "POST", "/api/v1/push", `{"items":[]}`, nil)
	// No token, a bad signature, an expired token, alg none: 401.
	for name, tok := range map[string]string{
		"none":      "",
		"garbage":   "abc.def.ghi",
		"wrong key": token(t, []byte("other"), jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin"}),
		"expired":   token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin", "exp": time.Now().Add(-time.Minute).Unix()}),
		"alg none":  noneToken(t),
	} {
		b.token = tok
		code, out, _ := b.do("GET", "/api/v1/resources/queues", nil)
		if code != 401 || string(out) != `{"error":"Authentication required"}` {
			t.Errorf("%s: %d %s", name, code, out)
		}
	}
	b.token = token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "read-only"})
	if code, out, _ := b.do("POST", "/api/v1/push", `{"items":[]}`); code != 403 || string(out) != `{"error":"Insufficient permissions"}` {
		t.Errorf("403 body: %d %s", code, out)
	}
	// Operations endpoints stay open.
	b.token = ""
	b.must(200, "GET", "/health", nil, nil)
	b.must(200, "GET", "/metrics/prometheus", nil, nil)
	_ = admin
	// Refused calls pushed nothing: write-only, read-write and admin
	// pushed one each.
	if n := e.events("q"); n != 3 {
		t.Fatalf("events: %d, want 3", n)
	}
}

func noneToken(t *testing.T) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"role": "admin"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Tenants: the same queue name in two tenants is two queues.
func TestTenants(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{AuthSecret: secret})
	ta := token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin", "tenant": "a"})
	tb := token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin", "tenant": "b"})
	b.token = ta
	res := b.push(item("q", "", map[string]int{"n": 1}, "same"))
	b.token = tb
	res2 := b.push(item("q", "", map[string]int{"n": 2}, "same"))
	if res[0].Status != "queued" || res2[0].Status != "queued" || res2[0].QueueName != "q" {
		t.Fatalf("pushes: %+v %+v", res, res2)
	}
	p := b.pop("/api/v1/pop/queue/q?autoAck=true")
	if p == nil || p.Queue != "q" || payloadN(p.Messages[0]) != 2 {
		t.Fatalf("tenant b pop: %+v", p)
	}
	if p := b.pop("/api/v1/pop/queue/q"); p != nil {
		t.Fatalf("tenant b saw tenant a's message: %+v", p)
	}
	var list struct {
		Queues []map[string]any `json:"queues"`
	}
	b.must(200, "GET", "/api/v1/resources/queues", nil, &list)
	if len(list.Queues) != 1 || list.Queues[0]["name"] != "q" {
		t.Fatalf("tenant b queues: %+v", list)
	}
	b.token = ta
	p = b.pop("/api/v1/pop/queue/q?autoAck=true")
	if p == nil || payloadN(p.Messages[0]) != 1 {
		t.Fatalf("tenant a pop: %+v", p)
	}
	if n := e.int(`SELECT count(*) FROM pgque.queue`); n != 2 {
		t.Fatalf("stored queues: %d", n)
	}
}

// A broker whose role may push and pop but not tick (no pgque_admin):
// pushes are poppable at once, with no tick (the broker needs none: it
// used to tick after each push, log the missing privilege once and leave
// the messages to the scheduled ticker's tick), and nothing is logged.
func TestBrokerWithoutTickPrivilege(t *testing.T) {
	e := setup(t)
	role := fmt.Sprintf("serve_app_%d", time.Now().UnixNano())
	e.exec(`CREATE ROLE ` + role + ` LOGIN PASSWORD 'pw' IN ROLE pgque_writer, pgque_reader`)
	t.Cleanup(func() { pgtest.Exec(t, e.dsn, `DROP ROLE IF EXISTS `+role) })
	cfg, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=pw", cfg.Host, cfg.Port, cfg.Database, role)
	pool, err := db.NewPool(ctxT(t), config.Connection{DSN: dsn, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logBuf logbuf.Buffer
	b := e.start(httpapi.Config{Pool: pool, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	b.push(item("q", "", map[string]int{"n": 1}, ""))
	b.push(item("q", "", map[string]int{"n": 2}, ""))
	p := b.pop("/api/v1/pop/queue/q?batch=10")
	if p == nil || len(p.Messages) != 2 {
		t.Fatalf("pop: %+v", p)
	}
	if n := strings.Count(logBuf.String(), "level=WARN"); n != 0 {
		t.Fatalf("warnings: %d, want none:\n%s", n, logBuf.String())
	}
}
