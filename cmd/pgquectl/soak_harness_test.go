package main

// The harness of the broker crash soaks (serve_soak_test.go: one broker
// SIGKILLed while its consumers hold leases; serve_chaos_soak_test.go:
// broker kills and PostgreSQL crashes): producers, consumers, the record
// of what was attempted, acknowledged and delivered, and the verdict on
// that record with its planted-defect self-check.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

const (
	soakLeaseSeconds = 3
	soakPartsPerProd = 4
)

// soakItem is the payload of a soak message: producer and sequence.
type soakItem struct {
	P int `json:"p"`
	S int `json:"s"`
}

func soakTxn(p, s int) string { return fmt.Sprintf("p%d-%d", p, s) }

// soakDelivery is one message as a consumer received it.
type soakDelivery struct {
	n        int64     // global receipt order
	at       time.Time // received
	asked    time.Time // the pop request was sent (the claim came later)
	group    string
	consumer int
	broker   string
	id, txn  string
	part     string // partition name
	partID   string // partitionId, for the ack
	item     soakItem
	attempt  int
	lease    string
}

type soakPopMsg struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Data            json.RawMessage `json:"data"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
}

// soakRecord is what a soak saw, and what its verdict is computed from.
type soakRecord struct {
	groups    []string             // "" = queue mode, then consumer groups
	attempted map[string]bool      // txn ids pushed (acknowledged or not)
	acked     map[string]string    // txn id -> message id of a push answered 201
	stored    map[string]int       // txn id -> events stored (after the run)
	delivered []soakDelivery       // every pop answer's messages, in receipt order
	ackedAt   map[string]time.Time // group/txn -> when its first successful ack answered
	orphans   []soakDelivery       // leased via a killed broker, abandoned unacked
}

// soakHeld is a batch a consumer of the victim broker holds (popped, not
// yet acked).
type soakHeld struct {
	msgs     []soakDelivery
	orphaned bool
}

// soakRun is the shared, locked state of a running soak.
type soakRun struct {
	queue      string
	maxBacklog int  // producers wait while a group lags more
	pop5xx     bool // PostgreSQL crashes: a 5xx pop answer is counted, not an error
	victim     *soakBroker

	mu     sync.Mutex
	seq    int64
	rec    soakRecord
	firsts map[string]map[string]bool // group -> txn ids delivered
	// counters for the report
	pushes, pushErrs, dups int
	pushCodes              map[int]int // non-2xx push answers by status
	popCodes               map[int]int // 5xx pop answers by status
	popErrs, ackErrs       int         // connection errors
	ackCodes               map[int]int // 5xx ack answers by status
	ackRefused, ackLost    int         // success:false items; batches given up
	refusals               []string    // the first refused acks, for the log

	killMu sync.Mutex
	held   map[int]*soakHeld // consumers of the victim holding a batch
}

func newSoakRun(queue string, groups []string, maxBacklog int) *soakRun {
	r := &soakRun{queue: queue, maxBacklog: maxBacklog,
		rec:       soakRecord{groups: groups, attempted: map[string]bool{}, acked: map[string]string{}, ackedAt: map[string]time.Time{}},
		firsts:    map[string]map[string]bool{},
		pushCodes: map[int]int{}, popCodes: map[int]int{}, ackCodes: map[int]int{},
		held: map[int]*soakHeld{}}
	for _, g := range groups {
		r.firsts[g] = map[string]bool{}
	}
	return r
}

// backlog is the number of acknowledged pushes not yet delivered in the
// group that lags most.
func (r *soakRun) backlog() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	least := len(r.rec.acked)
	for _, g := range r.rec.groups {
		least = min(least, len(r.firsts[g]))
	}
	return len(r.rec.acked) - least
}

// orphanHeld abandons every batch a consumer of the victim holds: call it
// with killMu held, right after the victim was killed.
func (r *soakRun) orphanHeld() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.held {
		h.orphaned = true
		r.rec.orphans = append(r.rec.orphans, h.msgs...)
	}
}

// soakProduce pushes batches of 5 items of producer p (sequence numbers
// over its 4 partitions), alternating brokers. A push that failed
// (connection error, 5xx) is retried with the same transactionIds on the
// other broker (dedup makes that safe) until one answers 201.
func soakProduce(ctx, hard context.Context, t *testing.T, client *http.Client, run *soakRun, brokers []*soakBroker, p int) {
	seq, turn := 0, p
	for ctx.Err() == nil {
		if run.backlog() > run.maxBacklog {
			// The consumers lag (a loaded machine): wait, so that the
			// drain stays short whatever the speed.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		type item struct {
			Queue         string   `json:"queue"`
			Partition     string   `json:"partition"`
			Payload       soakItem `json:"payload"`
			TransactionID string   `json:"transactionId"`
		}
		var items []item
		for range 5 {
			items = append(items, item{Queue: run.queue, Partition: fmt.Sprintf("p%d-k%d", p, seq%soakPartsPerProd),
				Payload: soakItem{P: p, S: seq}, TransactionID: soakTxn(p, seq)})
			seq++
		}
		body, _ := json.Marshal(map[string]any{"items": items})
		run.mu.Lock()
		for _, it := range items {
			run.rec.attempted[it.TransactionID] = true
		}
		run.mu.Unlock()
		for {
			br := brokers[turn%len(brokers)]
			turn++
			var res []struct {
				MessageID     string `json:"message_id"`
				TransactionID string `json:"transaction_id"`
				Status        string `json:"status"`
			}
			code, err := soakPost(hard, client, br.url()+"/api/v1/push", body, &res)
			run.mu.Lock()
			run.pushes++
			switch {
			case err == nil && code/100 == 2:
				if code != http.StatusCreated || len(res) != len(items) {
					t.Errorf("producer %d: push answered %d with %d results for %d items, want 201 and one each", p, code, len(res), len(items))
				}
				for i, r := range res {
					if i >= len(items) || r.TransactionID != items[i].TransactionID {
						t.Errorf("producer %d: push answer %d names transaction id %q", p, i, r.TransactionID)
						continue
					}
					run.rec.acked[r.TransactionID] = r.MessageID
					if r.Status == "duplicate" {
						run.dups++
					}
				}
			case err == nil && code/100 == 4:
				t.Errorf("producer %d: push answered %d", p, code)
			default:
				run.pushErrs++
				if err == nil {
					run.pushCodes[code]++
				}
			}
			run.mu.Unlock()
			if err == nil && code/100 != 5 {
				break
			}
			if hard.Err() != nil {
				t.Errorf("producer %d: push of seq %d..%d not acknowledged before the deadline (last: %d %v)", p, seq-5, seq-1, code, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// soakConsume long-polls broker br in group ("" = queue mode), records
// each delivery, "processes" it and acks the batch (completed). An odd
// consumer retries a failed ack until shortly before the lease ends; an
// even one gives the batch up at once (a client that moves on when its
// broker fails): the batch comes back when its lease expires. A consumer
// of run.victim registers the batch it holds and processes it slowly (so
// that the kill finds held leases); a batch held at the kill is abandoned
// (not acked): its lease must expire and the message come back.
func soakConsume(ctx context.Context, t *testing.T, client *http.Client, run *soakRun, br *soakBroker, c int, group string) {
	url := br.url() + "/api/v1/pop/queue/" + run.queue + fmt.Sprintf("?batch=10&wait=true&timeout=1000&leaseSeconds=%d", soakLeaseSeconds)
	if group != "" {
		url += "&consumerGroup=" + group + "&subscriptionMode=all"
	}
	victim := br == run.victim
	rng := rand.New(rand.NewPCG(uint64(c), 23))
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		asked := time.Now()
		resp, err := client.Do(req)
		var data []byte
		if err == nil {
			data, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err != nil {
			// The broker is down or restarting: retry.
			if ctx.Err() == nil {
				run.mu.Lock()
				run.popErrs++
				run.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		switch {
		case resp.StatusCode == http.StatusNoContent:
			continue
		case resp.StatusCode/100 == 5 && run.pop5xx:
			run.mu.Lock()
			run.popCodes[resp.StatusCode]++
			run.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			continue
		case resp.StatusCode != http.StatusOK:
			t.Errorf("consumer %d: pop answered %d %s", c, resp.StatusCode, data)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var pop struct {
			Messages []soakPopMsg `json:"messages"`
		}
		if err := json.Unmarshal(data, &pop); err != nil || len(pop.Messages) == 0 {
			t.Errorf("consumer %d: pop 200 with %q: %v", c, data, err)
			continue
		}
		now := time.Now()
		batch := make([]soakDelivery, len(pop.Messages))
		run.mu.Lock()
		for i, m := range pop.Messages {
			d := soakDelivery{n: run.seq, at: now, asked: asked, group: group, consumer: c, broker: br.name, id: m.ID,
				txn: m.TransactionID, part: m.Partition, partID: m.PartitionID, attempt: m.DeliveryAttempt, lease: m.LeaseID}
			run.seq++
			if err := json.Unmarshal(m.Data, &d.item); err != nil {
				t.Errorf("consumer %d: payload %s: %v", c, m.Data, err)
			}
			batch[i] = d
			run.rec.delivered = append(run.rec.delivered, d)
			run.firsts[group][d.txn] = true
		}
		run.mu.Unlock()
		if victim {
			run.killMu.Lock()
			run.held[c] = &soakHeld{msgs: batch}
			run.killMu.Unlock()
			time.Sleep(time.Duration(60+rng.IntN(60)) * time.Millisecond) // processing
			run.killMu.Lock()
			h := run.held[c]
			delete(run.held, c)
			run.killMu.Unlock()
			if h.orphaned {
				continue // its broker died while we held it: abandoned
			}
		} else {
			time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond) // processing
		}
		soakAck(ctx, t, client, run, br, c, group, batch, now)
	}
}

// soakAck acks a batch popped at popped (completed), retrying a failed ack
// on an odd consumer until shortly before the lease ends.
func soakAck(ctx context.Context, t *testing.T, client *http.Client, run *soakRun, br *soakBroker, c int, group string, batch []soakDelivery, popped time.Time) {
	acks := make([]map[string]string, len(batch))
	for i, d := range batch {
		acks[i] = map[string]string{"transactionId": d.txn, "partitionId": d.partID,
			"leaseId": d.lease, "status": "completed"}
	}
	body, _ := json.Marshal(map[string]any{"consumerGroup": group, "acknowledgments": acks})
	giveUp := popped.Add(soakLeaseSeconds*time.Second - 500*time.Millisecond)
	for {
		var res []struct {
			Success bool    `json:"success"`
			Error   *string `json:"error"`
		}
		code, err := soakPost(ctx, client, br.url()+"/api/v1/ack/batch", body, &res)
		answered := time.Now()
		run.mu.Lock()
		done := false
		switch {
		case err == nil && code == http.StatusOK && len(res) == len(batch):
			for i, r := range res {
				if r.Success {
					if _, ok := run.rec.ackedAt[group+"/"+batch[i].txn]; !ok {
						run.rec.ackedAt[group+"/"+batch[i].txn] = answered
					}
					continue
				}
				run.ackRefused++
				if len(run.refusals) < 5 {
					e := ""
					if r.Error != nil {
						e = *r.Error
					}
					run.refusals = append(run.refusals, fmt.Sprintf("consumer %d via %s, %s attempt %d, pop answered in %v, acked %v later: %s",
						c, br.name, batch[i].txn, batch[i].attempt, batch[i].at.Sub(batch[i].asked).Round(time.Millisecond),
						answered.Sub(batch[i].at).Round(time.Millisecond), e))
				}
			}
			done = true
		case err == nil && code == http.StatusOK:
			t.Errorf("consumer %d: ack of %d items answered %d results", c, len(batch), len(res))
			done = true
		case err == nil && code/100 != 5:
			t.Errorf("consumer %d: ack answered %d", c, code)
			done = true
		case err == nil:
			run.ackCodes[code]++
		case ctx.Err() == nil:
			run.ackErrs++
		}
		if !done && (ctx.Err() != nil || time.Now().After(giveUp) || c%2 == 0) {
			// The lease runs out: the batch comes back.
			run.ackLost++
			done = true
		}
		run.mu.Unlock()
		if done {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// soakPost posts a JSON body and decodes a JSON answer into out.
func soakPost(ctx context.Context, client *http.Client, url string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("answer %q: %w", data, err)
		}
	}
	return resp.StatusCode, nil
}

// countEvents counts the events of queue by ev_extra1 (the transactionId),
// those starting with prefix (every child of its event table).
func countEvents(t *testing.T, dsn, queue, prefix string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := pgtest.Conn(t, dsn)
	var tables []string
	err := conn.QueryRow(ctx, `SELECT array_agg(pgque.event_table(queue_id, n)) FROM pgque.queue, generate_series(0, 2) n
		WHERE queue_name = $1`, queue).Scan(&tables)
	if err != nil {
		t.Fatalf("event tables of %s: %v", queue, err)
	}
	var parts []string
	for _, tb := range tables {
		parts = append(parts, "SELECT ev_extra1 FROM "+tb)
	}
	rows, err := conn.Query(ctx, `SELECT ev_extra1, count(*) FROM (`+strings.Join(parts, " UNION ALL ")+`) e
		WHERE ev_extra1 LIKE $1 || '%' GROUP BY 1`, prefix)
	if err != nil {
		t.Fatalf("counting events of %s: %v", queue, err)
	}
	out := map[string]int{}
	for rows.Next() {
		var txn string
		var n int
		if err := rows.Scan(&txn, &n); err != nil {
			t.Fatal(err)
		}
		out[txn] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// drain records the stored events of the soak queue, then waits (within
// budget) until every one was delivered in every group and every orphaned
// lease came back; it reports what is still missing then, with the
// brokers' logs. It answers how long the drain took.
func (r *soakRun) drain(t *testing.T, dsn string, budget time.Duration, brokers []*soakBroker) time.Duration {
	t.Helper()
	stored := countEvents(t, dsn, r.queue, "")
	r.mu.Lock()
	r.rec.stored = stored
	r.mu.Unlock()
	start := time.Now()
	for {
		missing := r.missing()
		if missing == "" {
			break
		}
		if time.Since(start) > budget {
			// Go on: the verdict says more.
			var logs []string
			for _, br := range brokers {
				logs = append(logs, fmt.Sprintf("broker %s log:\n%s", br.name, br.logTail()))
			}
			t.Errorf("after a %v drain: %s\n%s", budget, missing, strings.Join(logs, "\n"))
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(start)
}

// missing says what the drain still waits for ("" = nothing): stored
// events not yet delivered in a group, orphaned leases not yet back (an
// acknowledged push that was not stored never comes: the verdict reports
// it).
func (r *soakRun) missing() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, g := range r.rec.groups {
		var miss []string
		for txn := range r.rec.stored {
			if !r.firsts[g][txn] {
				miss = append(miss, txn)
			}
		}
		if len(miss) > 0 {
			sort.Strings(miss)
			out = append(out, fmt.Sprintf("group %q: %d of %d stored events never delivered, e.g. %v",
				g, len(miss), len(r.rec.stored), miss[:min(5, len(miss))]))
		}
	}
	back := 0
	for _, o := range r.rec.orphans {
		if r.rec.redelivery(o) != nil {
			back++
		}
	}
	if back < len(r.rec.orphans) {
		out = append(out, fmt.Sprintf("%d of %d messages leased via the killed broker not redelivered", len(r.rec.orphans)-back, len(r.rec.orphans)))
	}
	return strings.Join(out, "; ")
}

// redelivery is the first delivery of o's message in o's group after o.
func (r soakRecord) redelivery(o soakDelivery) *soakDelivery {
	for i := range r.delivered {
		d := &r.delivered[i]
		if d.group == o.group && d.txn == o.txn && d.n > o.n {
			return d
		}
	}
	return nil
}

// verdict fails the test for every violation in the record (each kind:
// its count and its first 5), then checks on copies of the record with one
// defect planted each that the verdict can fail.
func (r soakRecord) verdict(t *testing.T) {
	t.Helper()
	byKind := map[string][]string{}
	var kinds []string
	for _, s := range r.violations() {
		kind, _, _ := strings.Cut(s, ": ")
		if byKind[kind] == nil {
			kinds = append(kinds, kind)
		}
		byKind[kind] = append(byKind[kind], s)
	}
	for _, kind := range kinds {
		v := byKind[kind]
		t.Errorf("%d x %s, e.g.\n\t%s", len(v), kind, strings.Join(v[:min(5, len(v))], "\n\t"))
	}
	r.selfCheck(t)
}

// violations lists everything wrong in the record, sorted; each line
// starts with its kind ("never delivered: ", "out of order: " ...).
// Pushes: one stored event per transactionId, none never pushed, every
// acknowledged push stored. Deliveries: of stored events only, with the id
// the push was answered, payload, transactionId and partition agreeing;
// every stored or acknowledged event delivered to every group; nothing
// delivered again after an ack of it succeeded, nor while a lease on it
// was live, nor with a delivery attempt that did not grow; in each
// partition and group, first deliveries in push order. Orphans (leased via
// a killed broker, abandoned): delivered again, with a higher attempt,
// once their lease expired.
func (r soakRecord) violations() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	// Pushes: one event per transaction id, every acknowledged push stored.
	for txn, n := range r.stored {
		if n != 1 {
			add("stored twice: transaction id %s stored %d times", txn, n)
		}
		if !r.attempted[txn] {
			add("unknown event: %s stored, never pushed", txn)
		}
	}
	for txn := range r.acked {
		if r.stored[txn] == 0 {
			add("push lost: %s acknowledged, not stored", txn)
		}
	}
	// Deliveries.
	type key struct{ group, txn string }
	first := map[key]soakDelivery{}
	last := map[key]soakDelivery{}
	byPart := map[string][]soakDelivery{}
	for _, d := range r.delivered {
		if r.stored[d.txn] == 0 {
			add("unknown delivery: %s (%q) delivered, not stored", d.txn, d.group)
			continue
		}
		if want, ok := r.acked[d.txn]; ok && want != d.id {
			add("wrong id: %s delivered to %q with id %s, its push was answered %s", d.txn, d.group, d.id, want)
		}
		if d.txn != soakTxn(d.item.P, d.item.S) || d.part != fmt.Sprintf("p%d-k%d", d.item.P, d.item.S%soakPartsPerProd) {
			add("mixed up: delivery %+v: payload, transaction id and partition disagree", d)
		}
		k := key{d.group, d.txn}
		if prev, seen := last[k]; seen {
			// The earlier lease was taken after prev.asked and ran 3 s
			// from then (acks are all completed: only expiry redelivers).
			if d.at.Sub(prev.asked) < soakLeaseSeconds*time.Second-50*time.Millisecond {
				add("under a live lease: %s (%q) delivered again (attempt %d, consumer %d via %s) %v after the pop that leased it (attempt %d, consumer %d via %s) was sent",
					d.txn, d.group, d.attempt, d.consumer, d.broker, d.at.Sub(prev.asked).Round(time.Millisecond), prev.attempt, prev.consumer, prev.broker)
			}
			if d.attempt <= prev.attempt {
				add("attempt not counted: %s (%q) delivered again with delivery attempt %d, before %d", d.txn, d.group, d.attempt, prev.attempt)
			}
		}
		last[k] = d
		if at, ok := r.ackedAt[d.group+"/"+d.txn]; ok && d.at.After(at) {
			add("after its ack: %s delivered to %q (consumer %d via %s) at %s, its ack succeeded at %s",
				d.txn, d.group, d.consumer, d.broker, d.at.Format("15:04:05.000"), at.Format("15:04:05.000"))
		}
		if _, seen := first[k]; seen {
			continue
		}
		first[k] = d
		byPart[d.group+"/"+d.part] = append(byPart[d.group+"/"+d.part], d)
	}
	for txn := range r.stored {
		for _, g := range r.groups {
			if _, ok := first[key{g, txn}]; !ok {
				add("never delivered: %s (stored) not delivered to %q", txn, g)
			}
		}
	}
	for txn := range r.acked {
		if r.stored[txn] != 0 {
			continue // reported above if not delivered
		}
		for _, g := range r.groups {
			if _, ok := first[key{g, txn}]; !ok {
				add("never delivered: %s (acknowledged) not delivered to %q", txn, g)
			}
		}
	}
	parts := make([]string, 0, len(byPart))
	for gp := range byPart {
		parts = append(parts, gp)
	}
	sort.Strings(parts)
	for _, gp := range parts {
		ds := byPart[gp]
		for i := 1; i < len(ds); i++ {
			if ds[i].item.S <= ds[i-1].item.S {
				add("out of order: %s: first delivery of seq %d (consumer %d via %s) after seq %d (consumer %d via %s)",
					gp, ds[i].item.S, ds[i].consumer, ds[i].broker, ds[i-1].item.S, ds[i-1].consumer, ds[i-1].broker)
				break
			}
		}
	}
	// Orphans: back through lease expiry, not before it.
	for _, o := range r.orphans {
		again := r.redelivery(o)
		switch {
		case again == nil:
			add("orphan never redelivered: %s (%q) leased via the killed broker was never redelivered", o.txn, o.group)
		case again.attempt <= o.attempt:
			add("orphan attempt not counted: %s (%q) redelivered with delivery attempt %d, first %d", o.txn, o.group, again.attempt, o.attempt)
		case again.at.Sub(o.asked) < soakLeaseSeconds*time.Second-50*time.Millisecond:
			// The lease was taken after o.asked and runs 3 s from then.
			add("orphan redelivered early: %s (%q) redelivered %v after the pop that leased it was sent: before the %d s lease expired",
				o.txn, o.group, again.at.Sub(o.asked), soakLeaseSeconds)
		}
	}
	sort.Strings(out)
	return out
}

// selfCheck plants one defect at a time in a copy of a clean record and
// fails unless violations reports it: the verdict can fail.
func (r soakRecord) selfCheck(t *testing.T) {
	t.Helper()
	rec := r
	clone := func() soakRecord {
		c := soakRecord{groups: rec.groups, attempted: rec.attempted, acked: map[string]string{}, stored: map[string]int{},
			delivered: append([]soakDelivery(nil), rec.delivered...), ackedAt: map[string]time.Time{},
			orphans: append([]soakDelivery(nil), rec.orphans...)}
		for k, v := range rec.acked {
			c.acked[k] = v
		}
		for k, v := range rec.stored {
			c.stored[k] = v
		}
		for k, v := range rec.ackedAt {
			c.ackedAt[k] = v
		}
		return c
	}
	// One acknowledged, acked message of the last group and one pair of
	// consecutive first deliveries of one partition.
	group := rec.groups[len(rec.groups)-1]
	var victim soakDelivery
	found := false
	for _, d := range rec.delivered {
		if _, ok := rec.ackedAt[d.group+"/"+d.txn]; ok && d.group == group && rec.acked[d.txn] != "" {
			victim, found = d, true
			break
		}
	}
	if !found {
		t.Errorf("self-check: no acked delivery in %q to plant defects on", group)
		return
	}
	pair := [2]int{-1, -1}
	firstSeen := map[string]bool{}
	lastFirst := map[string]int{}
	for i, d := range rec.delivered {
		if firstSeen[d.group+"/"+d.txn] {
			continue
		}
		firstSeen[d.group+"/"+d.txn] = true
		gp := d.group + "/" + d.part
		if j, ok := lastFirst[gp]; ok {
			pair = [2]int{j, i}
			break
		}
		lastFirst[gp] = i
	}
	plants := []struct {
		name, want string
		plant      func(*soakRecord)
	}{
		{"lose a message of " + group, "never delivered: " + victim.txn, func(r *soakRecord) {
			kept := r.delivered[:0]
			for _, d := range r.delivered {
				if !(d.group == victim.group && d.txn == victim.txn) {
					kept = append(kept, d)
				}
			}
			r.delivered = kept
		}},
		{"deliver one again after its ack", "after its ack: " + victim.txn, func(r *soakRecord) {
			d := victim
			d.at = rec.ackedAt[d.group+"/"+d.txn].Add(time.Second)
			d.asked, d.attempt = d.at.Add(-10*time.Second), d.attempt+1
			r.delivered = append(r.delivered, d)
		}},
		{"deliver one again under its lease", "under a live lease: " + victim.txn, func(r *soakRecord) {
			d := victim
			d.at, d.attempt = d.asked.Add(time.Second), d.attempt+1
			r.delivered = append(r.delivered, d)
		}},
		{"deliver one again without counting the attempt", "attempt not counted: " + victim.txn, func(r *soakRecord) {
			d := victim
			d.at = d.asked.Add(10 * time.Second)
			r.delivered = append(r.delivered, d)
		}},
		{"store one twice", "stored twice: transaction id " + victim.txn, func(r *soakRecord) { r.stored[victim.txn] = 2 }},
		{"lose an acknowledged push", "push lost: " + victim.txn, func(r *soakRecord) { delete(r.stored, victim.txn) }},
		{"swap two first deliveries of a partition", "out of order: ", func(r *soakRecord) {
			if pair[0] >= 0 {
				r.delivered[pair[0]], r.delivered[pair[1]] = r.delivered[pair[1]], r.delivered[pair[0]]
			}
		}},
	}
	if pair[0] < 0 {
		t.Errorf("self-check: no partition with two first deliveries in one group")
	}
	if len(rec.orphans) > 0 {
		o := rec.orphans[0]
		plants = append(plants, struct {
			name, want string
			plant      func(*soakRecord)
		}{"never redeliver an orphan", "orphan never redelivered: " + o.txn, func(r *soakRecord) {
			kept := r.delivered[:0]
			for _, d := range r.delivered {
				if !(d.group == o.group && d.txn == o.txn && d.n > o.n) {
					kept = append(kept, d)
				}
			}
			r.delivered = kept
		}})
	}
	for _, p := range plants {
		c := clone()
		p.plant(&c)
		hit := false
		for _, v := range c.violations() {
			if strings.HasPrefix(v, p.want) {
				hit = true
				break
			}
		}
		if !hit {
			t.Errorf("self-check: the verdict missed a planted defect (%s): no violation starting %q", p.name, p.want)
		}
	}
}
