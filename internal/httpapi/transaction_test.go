package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// A transaction with requiredLeases (Queen's client transaction builders
// always send them) whose lease check waits behind a group-cursor rotation
// (rows moved to the next child, the old child TRUNCATEd, not committed
// yet): once the rotation commits, the live lease is found where it moved
// and the transaction commits. The check used to read with a snapshot
// taken before its wait and answered "required lease ... is invalid or
// expired", rolling the whole transaction back.
func TestTransactionRequiredLeaseBehindRotation(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	b.push(item("in", "", map[string]int{"n": 1}, "m1"))
	p := b.pop("/api/v1/pop/queue/in")
	ack := ackOf(p.Messages[0], "completed")
	ack["type"] = "ack"
	body, err := json.Marshal(map[string]any{
		"operations":     []any{ack, map[string]any{"type": "push", "items": []any{item("out", "", map[string]int{"n": 2}, "")}}},
		"requiredLeases": []string{p.LeaseID}})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		Success bool   `json:"success"`
		Reason  string `json:"reason"`
		Error   string `json:"error"`
		Results []struct {
			Type    string `json:"type"`
			Success bool   `json:"success"`
		} `json:"results"`
	}
	h := pgtest.HoldRotation(t, e.dsn, "group_cursor")
	res := pgtest.DuringRotation(t, h, "group_lease_live", func() (answer, error) {
		var a answer
		req, err := http.NewRequestWithContext(ctxT(t), "POST", b.ts.URL+"/api/v1/transaction", bytes.NewReader(body))
		if err != nil {
			return a, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.ts.Client().Do(req)
		if err != nil {
			return a, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			return a, err
		}
		if resp.StatusCode != http.StatusOK {
			return a, fmt.Errorf("status %d: %s", resp.StatusCode, out)
		}
		return a, json.Unmarshal(out, &a)
	})
	if !res.Success || len(res.Results) != 2 || !res.Results[0].Success || !res.Results[1].Success {
		t.Fatalf("transaction behind a group-cursor rotation: %+v", res)
	}
	if q := b.pop("/api/v1/pop/queue/out"); q == nil || payloadN(q.Messages[0]) != 2 {
		t.Fatalf("pushed in the transaction: %+v", q)
	}
	if q := b.pop("/api/v1/pop/queue/in"); q != nil {
		t.Fatalf("acked in the transaction but redelivered: %+v", q)
	}
}
