package httpapi_test

import (
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// Tenants are sealed on every route that takes an id: another tenant's
// dead-letter id, lease id, partition id or label behaves exactly like one
// that does not exist (same status, same body), and changes nothing.

const unknownUUID = "6f1c1a2e-0000-4000-8000-000000000000"

// tenantBroker starts a broker with auth on and returns it with admin
// tokens of tenants a and b and of the default tenant (no tenant claim).
func tenantBroker(t *testing.T) (e *env, b *brokerT, ta, tb, none string) {
	e = setup(t)
	b = e.start(httpapi.Config{AuthSecret: secret})
	ta = token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin", "tenant": "a"})
	tb = token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin", "tenant": "b"})
	none = token(t, secret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin"})
	return e, b, ta, tb, none
}

// deadLetter pushes one message to the caller's queue q and dead-letters
// it; it returns its dead-letter id.
func deadLetter(t *testing.T, b *brokerT, n int) string {
	t.Helper()
	b.push(item("q", "", map[string]int{"n": n}, ""))
	p := b.pop("/api/v1/pop/queue/q")
	if p == nil {
		t.Fatal("nothing to pop")
	}
	if a := b.ack("", ackOf(p.Messages[0], "dlq")); !a[0].Success || !a[0].DLQ {
		t.Fatalf("dlq ack: %+v", a)
	}
	var list struct {
		Messages []struct {
			ID            string `json:"id"`
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	b.must(200, "GET", "/api/v1/dlq?queue=q", nil, &list)
	for _, m := range list.Messages {
		if m.TransactionID == p.Messages[0].TransactionID {
			return m.ID
		}
	}
	t.Fatalf("dead letter not listed: %+v", list)
	return ""
}

// Row 1: tenant b replays tenant a's dead letter by its (sequential) id.
func TestTenantSealDLQReplay(t *testing.T) {
	e, b, ta, tb, none := tenantBroker(t)
	b.token = ta
	id := deadLetter(t, b, 1)
	for _, c := range []struct{ name, tok string }{{"tenant b", tb}, {"no tenant", none}} {
		name := c.name
		b.token = c.tok
		code, out, _ := b.do("POST", "/api/v1/dlq/"+id+"/replay", nil)
		wantCode, want, _ := b.do("POST", "/api/v1/dlq/999999/replay", nil)
		// The answer names the id asked for: the same text with the id.
		if code != wantCode || string(out) != strings.ReplaceAll(string(want), "999999", id) {
			t.Errorf("%s replays a's dead letter %s: %d %s, want %d %s (as an unknown id)", name, id, code, out, wantCode, want)
		}
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_dead_letter`); n != 1 {
		t.Fatalf("a's dead letter moved: %d left", n)
	}
	b.token = ta
	b.must(200, "POST", "/api/v1/dlq/"+id+"/replay", nil, nil)
}

// Row 2: tenant b acks, extends or requires tenant a's lease by its ids.
func TestTenantSealAckAndLease(t *testing.T) {
	_, b, ta, tb, none := tenantBroker(t)
	b.token = ta
	b.push(item("q", "", map[string]int{"n": 1}, ""), item("q", "", map[string]int{"n": 2}, ""))
	p := b.pop("/api/v1/pop/queue/q?batch=2")
	if p == nil || len(p.Messages) != 2 {
		t.Fatalf("a's pop: %+v", p)
	}
	m := p.Messages[0]
	for name, tok := range map[string]string{"tenant b": tb, "no tenant": none} {
		b.token = tok
		// Ack without leaseId, as the attack did, and with a's lease.
		for _, lease := range []string{"", m.LeaseID} {
			body := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": lease}
			_, out, _ := b.do("POST", "/api/v1/ack", body)
			body["partitionId"] = unknownUUID
			_, want, _ := b.do("POST", "/api/v1/ack", body)
			if string(out) != string(want) || !strings.Contains(string(out), `"success":false`) {
				t.Errorf("%s acks a's message (lease %q): %s, want %s (as an unknown partition)", name, lease, out, want)
			}
		}
		// Extend a's lease.
		_, out, _ := b.do("POST", "/api/v1/lease/"+m.LeaseID+"/extend", `{"seconds":3600}`)
		_, want, _ := b.do("POST", "/api/v1/lease/"+unknownUUID+"/extend", `{"seconds":3600}`)
		if strings.ReplaceAll(string(out), m.LeaseID, unknownUUID) != string(want) {
			t.Errorf("%s extends a's lease: %s, want %s (as an unknown lease)", name, out, want)
		}
		// Require a's lease in a transaction.
		tx := func(lease string) string {
			_, out, _ := b.do("POST", "/api/v1/transaction", map[string]any{
				"operations":     []any{map[string]any{"type": "push", "items": []any{item("q2", "", 1, "")}}},
				"requiredLeases": []string{lease}})
			return strings.ReplaceAll(string(out), lease, "<lease>")
		}
		if out, want := tx(m.LeaseID), tx(unknownUUID); out != want || !strings.Contains(out, `"success":false`) {
			t.Errorf("%s requires a's lease: %s, want %s (as an unknown lease)", name, out, want)
		}
	}
	// a's own acks were not pre-empted: both complete (neither is a noop),
	// the second releases the lease.
	b.token = ta
	a := b.ack("", ackOf(p.Messages[0], ""), ackOf(p.Messages[1], ""))
	if !a[0].Success || a[0].Noop || !a[1].Success || a[1].Noop || !a[1].LeaseReleased {
		t.Fatalf("a's own acks: %+v", a)
	}
}

// Row 3: a token without a tenant pops tenant a's queue through a label
// holding U+241F ("a␟nsx" is how a's label nsx is stored).
func TestTenantSealLabelPop(t *testing.T) {
	_, b, ta, _, none := tenantBroker(t)
	b.token = ta
	b.must(200, "POST", "/api/v1/configure", `{"queue":"tq","namespace":"nsx","task":"tk","options":{}}`, nil)
	b.push(item("tq", "", map[string]int{"n": 1}, ""))
	b.token = none
	for _, q := range []string{"namespace=a%E2%90%9Fnsx", "task=a%E2%90%9Ftk", "namespace=a%1Fnsx"} {
		code, out, _ := b.do("GET", "/api/v1/pop?"+q, nil)
		if code != 400 {
			t.Errorf("pop ?%s without a tenant: %d %s, want 400", q, code, out)
		}
	}
	// The label itself names none of the default tenant's queues.
	if p := b.pop("/api/v1/pop?namespace=nsx"); p != nil {
		t.Errorf("pop ?namespace=nsx without a tenant: %+v", p)
	}
	// Labels with U+241F / 0x1f are refused where they are set as well.
	if code, out, _ := b.do("POST", "/api/v1/configure", `{"queue":"x","namespace":"a\u241fnsx"}`); code != 400 {
		t.Errorf("configure with a U+241F namespace: %d %s", code, out)
	}
	// a's message was not leased by any of that: a pops it.
	b.token = ta
	if p := b.pop("/api/v1/pop?namespace=nsx"); p == nil || p.Queue != "tq" || len(p.Messages) != 1 {
		t.Fatalf("a's label pop: %+v", p)
	}
}

// Row 4: the dead-letter list's total counts the caller's dead letters
// only (a list without ?queue=).
func TestTenantSealDLQTotal(t *testing.T) {
	_, b, ta, tb, none := tenantBroker(t)
	b.token = ta
	deadLetter(t, b, 1)
	deadLetter(t, b, 2)
	b.token = tb
	deadLetter(t, b, 3)
	type list struct {
		Messages []map[string]any `json:"messages"`
		Total    int              `json:"total"`
	}
	for _, want := range []struct {
		name, tok string
		n         int
	}{{"no tenant", none, 0}, {"tenant a", ta, 2}, {"tenant b", tb, 1}} {
		b.token = want.tok
		var l list
		b.must(200, "GET", "/api/v1/dlq", nil, &l)
		if l.Total != want.n || len(l.Messages) != want.n {
			t.Errorf("%s: total %d, %d messages, want %d", want.name, l.Total, len(l.Messages), want.n)
		}
	}
}
