package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary be the load client (startLoadClient
// starts os.Executable() with loadClientArg).
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == loadClientArg {
		os.Exit(loadClientMain(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// fakeBroker answers the three routes of the latency cells the way the
// broker does (push: 201 and one status per item; wildcard pop: leased
// messages or, after waiting, 204; ack/batch: one result per item) and
// records what the client sent.
type fakeBroker struct {
	t       *testing.T
	mu      sync.Mutex
	cond    *sync.Cond
	pending []fakeMsg
	leased  map[string]fakeMsg // by transactionId
	next    int
	txIDs   map[string]bool
	pushes  int // POST /api/v1/push requests
	items   int // items in them
	pops    int
	acks    int
	bad     []string // protocol violations seen
}

type fakeMsg struct {
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	LeaseID       string          `json:"leaseId"`
	Data          json.RawMessage `json:"data"`
}

func newFakeBroker(t *testing.T) *fakeBroker {
	f := &fakeBroker{t: t, leased: map[string]fakeMsg{}, txIDs: map[string]bool{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *fakeBroker) violation(format string, a ...any) {
	f.bad = append(f.bad, fmt.Sprintf(format, a...))
}

func (f *fakeBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/push":
		var req struct {
			Items []struct {
				Queue     string          `json:"queue"`
				Partition string          `json:"partition"`
				Payload   json.RawMessage `json:"payload"`
				TxID      string          `json:"transactionId"`
			} `json:"items"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || len(req.Items) != 1 || r.Header.Get("Content-Type") != "application/json" {
			f.violation("push %q: %v (want one item, JSON)", raw, err)
			http.Error(w, "bad push", http.StatusBadRequest)
			return
		}
		f.pushes++
		f.items += len(req.Items)
		it := req.Items[0]
		if !uuidRE.MatchString(it.TxID) || f.txIDs[it.TxID] {
			f.violation("push transactionId %q: want a fresh UUID v4", it.TxID)
		}
		f.txIDs[it.TxID] = true
		f.next++
		f.pending = append(f.pending, fakeMsg{TransactionID: "tx" + strconv.Itoa(f.next), PartitionID: "pid-" + it.Partition, Data: it.Payload})
		f.cond.Broadcast()
		w.Header().Set("Server-Timing", "db;dur=0.5")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `[{"index":0,"message_id":"m%d","transaction_id":"tx%d","queueName":%q,"status":"queued"}]`, f.next, f.next, it.Queue)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pop/queue/q":
		q := r.URL.Query()
		batch, _ := strconv.Atoi(q.Get("batch"))
		if q.Get("wait") != "true" || q.Get("timeout") != "1000" || batch != 100 || q.Get("partitions") != "3" {
			f.violation("pop query %q", r.URL.RawQuery)
		}
		f.pops++
		deadline := time.Now().Add(200 * time.Millisecond)
		for len(f.pending) == 0 && time.Now().Before(deadline) {
			f.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			f.mu.Lock()
		}
		if len(f.pending) == 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		n := min(batch, len(f.pending))
		out := f.pending[:n:n]
		f.pending = f.pending[n:]
		for i := range out {
			out[i].LeaseID = "lease-" + out[i].TransactionID
			f.leased[out[i].TransactionID] = out[i]
		}
		w.Header().Set("Server-Timing", "db;dur=0.7, park;dur=0.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"messages": out})
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/ack/batch":
		var req struct {
			Acks []struct {
				TransactionID string  `json:"transactionId"`
				PartitionID   string  `json:"partitionId"`
				LeaseID       string  `json:"leaseId"`
				Status        string  `json:"status"`
				Error         *string `json:"error"`
			} `json:"acknowledgments"`
			Group *string `json:"consumerGroup"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || req.Group != nil || len(req.Acks) == 0 {
			f.violation("ack %q: %v", raw, err)
		}
		f.acks++
		res := make([]map[string]any, len(req.Acks))
		for i, a := range req.Acks {
			m, ok := f.leased[a.TransactionID]
			if !ok || a.Status != "completed" || a.Error != nil || a.LeaseID != m.LeaseID || a.PartitionID != m.PartitionID {
				f.violation("ack item %+v; leased: %v, partitionId %q, leaseId %q", a, ok, m.PartitionID, m.LeaseID)
			}
			delete(f.leased, a.TransactionID)
			res[i] = map[string]any{"index": i, "transactionId": a.TransactionID, "success": ok}
		}
		_ = json.NewEncoder(w).Encode(res)
	default:
		f.violation("unexpected %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestLoadClientIsAQueenClient runs the latency cell's load client as a
// process (the test binary, see TestMain) against a fake broker, through
// the parent's protocol: every message is pushed in a request of its own,
// popped by a long-polling wildcard pop and acked with its lease before
// the next pop; latencies are recorded for each, none lost or duplicated.
// With TransactionIDs every item carries a fresh UUID, as Queen's JS
// client sends.
func TestLoadClientIsAQueenClient(t *testing.T) {
	f := newFakeBroker(t)
	srv := httptest.NewServer(f)
	defer srv.Close()
	spec := loadSpec{PushURL: srv.URL, PopURL: srv.URL, Queue: "q", Rate: 500, Duration: 400 * time.Millisecond,
		Partitions: 3, Consumers: 2, Drain: 2 * time.Second, TransactionIDs: true}
	ctx := context.Background()
	lc, err := startLoadClient(ctx, spec, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.stop()
	if lc.pid() == os.Getpid() {
		t.Fatal("the load client runs in this process")
	}
	if err := lc.send("go"); err != nil {
		t.Fatal(err)
	}
	if err := lc.expect("done"); err != nil {
		t.Fatal(err)
	}
	res, err := lc.report()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bad {
		t.Error(b)
	}
	// 500 msg/s for 400 ms: 200 scheduled (fewer when the producer's sleeps
	// overshoot the cell's end on a busy machine).
	n := res.Pushed
	if n < 100 || n > 200 || int64(f.pushes) != n+1 || f.items != f.pushes {
		t.Errorf("pushed %d answered, the broker saw %d requests with %d items; want 100-200, and one request per message plus the warm-up", n, f.pushes, f.items)
	}
	// Consumed counts the messages of the pops that started in the
	// window (the first may have started before it).
	if res.Consumed > n || res.Consumed < n-100 || res.Missing != 0 || res.Duplicates != 0 || res.Errors != 0 || len(f.leased) != 0 || len(f.pending) != 0 {
		t.Errorf("consumed %d, missing %d, duplicates %d, errors %d, left leased %d, pending %d; want ≤ %d, 0, 0, 0, 0, 0",
			res.Consumed, res.Missing, res.Duplicates, res.Errors, len(f.leased), len(f.pending), n)
	}
	if res.Latency == nil || int64(res.Latency.Count) != n || int64(res.PushRequest.Count) != n || int64(res.SendLatency.Count) != n {
		t.Errorf("latencies recorded: %+v / push %+v / send %+v, want %d each", res.Latency, res.PushRequest, res.SendLatency, n)
	}
	if d := res.Steps["push_db"]; d == nil || d.P50 != 0.5 {
		t.Errorf("push_db step %+v, want the Server-Timing db 0.5 ms", d)
	}
	if res.PopsWithMsg == 0 || int64(f.acks) < res.PopsWithMsg || res.Steps["ack"].Count != int(res.PopsWithMsg) {
		t.Errorf("pops with messages %d, ack requests %d (recorded %d): want an ack per pop that returned messages", res.PopsWithMsg, f.acks, res.Steps["ack"].Count)
	}
}
