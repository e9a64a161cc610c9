package main

// The broker's correctness soak (issue 11): real `pgquectl serve`
// processes on one database, one of them SIGKILLed and restarted while
// producers push and consumers hold leases through it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// buildPgquectl builds the pgquectl binary into a test temp dir.
func buildPgquectl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pgquectl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// soakBroker is one `pgquectl serve` process that the test can kill and
// restart on the same address.
type soakBroker struct {
	t             *testing.T
	name          string
	bin, dsn, log string
	addr          string
	args          []string // extra serve flags
	mu            sync.Mutex
	cmd           *exec.Cmd
	exited        chan struct{}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newSoakBroker(t *testing.T, name, bin, dsn string) *soakBroker {
	b := &soakBroker{t: t, name: name, bin: bin, dsn: dsn, addr: freeAddr(t),
		log: filepath.Join(t.TempDir(), name+".log")}
	t.Cleanup(b.stop)
	return b
}

func (b *soakBroker) url() string { return "http://" + b.addr }

// start runs the process and waits until it answers /status.
func (b *soakBroker) start() {
	b.t.Helper()
	logf, err := os.OpenFile(b.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	defer logf.Close()
	// A small pool: 2 cores are shared by everything in this test.
	args := append([]string{"serve", "--dsn", b.dsn, "--listen", b.addr, "--pool-size", "6", "--drain-timeout", "5s"}, b.args...)
	cmd := exec.Command(b.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("starting broker %s: %v", b.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b.mu.Lock()
	b.cmd, b.exited = cmd, exited
	b.mu.Unlock()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := client.Get(b.url() + "/status"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			b.t.Fatalf("broker %s exited at start; log:\n%s", b.name, b.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("broker %s did not answer on %s within 60 s; log:\n%s", b.name, b.addr, b.logTail())
		}
	}
}

// kill SIGKILLs the process and waits until it is gone.
func (b *soakBroker) kill() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop ends a running process gracefully (SIGTERM, then SIGKILL).
func (b *soakBroker) stop() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// logTail is the end of the broker's log without its access-log lines.
func (b *soakBroker) logTail() string {
	data, _ := os.ReadFile(b.log)
	var keep []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.Contains(l, "level=INFO msg=http ") {
			keep = append(keep, l)
		}
	}
	out := strings.Join(keep, "\n")
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return out
}

const (
	soakQueue      = "soak"
	soakGroup      = "g1"
	soakMaxBacklog = 300
	soakDrain      = 60 * time.Second
)

// TestServeSoakKilledBroker: 4 producers and 8 consumers through two
// brokers on one database; broker B is SIGKILLed while some of its
// consumers hold leases and restarted on the same port. Every acknowledged
// push is delivered (in queue mode and in a consumer group), nothing is
// lost, per-partition order holds among first deliveries, and the leases
// taken through the dead broker are redelivered once they expire.
//
// Nothing but the brokers ticks: each push is followed by a broker-driven
// tick of its queue (no pg_cron job, no daemon). Producers retry a failed
// push with the same transactionIds on the other broker (dedup makes that
// safe: the test asserts one event per id). Consumers stay on their broker
// and retry its connection. A consumer of B holding a batch at the kill
// abandons it, as a client whose broker died mid-lease may: those
// messages must come back through lease expiry, not before it, with a
// higher delivery attempt. Producers, consumers, the record and the
// verdict with its planted-defect self-check are the crash soak's
// (soak_harness_test.go, soakRecord.violations).
//
// Shown to fail: with lease expiry disabled in pop_list (the orphans and
// every later message of their partitions never come back), and with an
// ack that releases the lease without moving the position past the batch
// end (the drain never completes; the message comes back after its ack).
func TestServeSoakKilledBroker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	start := time.Now()
	dsn := pgtest.NewDB(t)
	bin := buildPgquectl(t)
	a := newSoakBroker(t, "A", bin, dsn)
	b := newSoakBroker(t, "B", bin, dsn)
	var wg sync.WaitGroup
	for _, br := range []*soakBroker{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); br.start() }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	run := newSoakRun(soakQueue, []string{"", soakGroup}, soakMaxBacklog)
	run.victim = b
	client := &http.Client{Timeout: 15 * time.Second}
	hard, cancelHard := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancelHard()
	prodCtx, stopProducers := context.WithCancel(hard)
	defer stopProducers()
	consCtx, stopConsumers := context.WithCancel(hard)
	defer stopConsumers()

	// 8 consumers: 0-3 queue mode, 4-7 group g1; even ones on A, odd on B.
	var consumers sync.WaitGroup
	for c := range 8 {
		br, group := a, ""
		if c%2 == 1 {
			br = b
		}
		if c >= 4 {
			group = soakGroup
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			soakConsume(consCtx, t, client, run, br, c, group)
		}()
	}
	// 4 producers, each over its own 4 partitions, alternating brokers.
	var producers sync.WaitGroup
	for p := range 4 {
		producers.Add(1)
		go func() {
			defer producers.Done()
			soakProduce(prodCtx, hard, t, client, run, []*soakBroker{a, b}, p)
		}()
	}

	// Mid-run: kill B while at least two of its consumers hold a batch
	// (after 10 s of trying, one will do).
	time.Sleep(5 * time.Second)
	killStart := time.Now()
	var killedAt time.Time
	for {
		run.killMu.Lock()
		if len(run.held) >= 2 || (len(run.held) == 1 && time.Since(killStart) > 10*time.Second) {
			b.kill()
			killedAt = time.Now()
			run.orphanHeld()
			run.killMu.Unlock()
			break
		}
		run.killMu.Unlock()
		if time.Since(killStart) > 30*time.Second {
			t.Fatal("no consumer of broker B held a batch within 30 s: the soak cannot test lease expiry")
		}
		time.Sleep(5 * time.Millisecond)
	}
	run.mu.Lock()
	orphans := len(run.rec.orphans)
	run.mu.Unlock()
	t.Logf("broker B killed at %v with %d messages leased through it, unacked", killedAt.Sub(start).Round(time.Millisecond), orphans)
	time.Sleep(1500 * time.Millisecond)
	b.start()
	t.Logf("broker B restarted at %v", time.Since(start).Round(time.Millisecond))

	time.Sleep(8 * time.Second)
	stopProducers()
	producers.Wait()
	if t.Failed() {
		stopConsumers()
		consumers.Wait()
		return
	}

	// Drain: until every stored event was delivered in both groups and
	// every orphaned lease came back.
	drained := run.drain(t, dsn, soakDrain, []*soakBroker{a, b})
	stopConsumers()
	consumers.Wait()

	run.mu.Lock()
	defer run.mu.Unlock()
	rec := run.rec
	if len(rec.orphans) == 0 {
		t.Fatal("no orphaned lease recorded")
	}
	rec.verdict(t)
	for _, e := range run.refusals {
		t.Logf("ack refused: %s", e)
	}
	distinct := map[string]bool{}
	for _, d := range rec.delivered {
		distinct[d.group+"/"+d.txn] = true
	}
	t.Logf("%d pushes attempted, %d acknowledged (%d answered duplicate after a retry, %d push errors retried), %d stored; "+
		"%d deliveries (%d redeliveries), %d orphaned by the kill, %d acks refused, %d batches given up; drained in %v, %v in all",
		len(rec.attempted), len(rec.acked), run.dups, run.pushErrs, len(rec.stored),
		len(rec.delivered), len(rec.delivered)-len(distinct), len(rec.orphans), run.ackRefused, run.ackLost, drained.Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond))
}

// A broker SIGKILLed while a push of 1,000 items (two queues, 500 each) is
// in flight — its statement blocked half-way, after the first queue's
// INSERT, on a lock the test holds on the second queue's event table —
// leaves either all of them or none: events and dedup records. Shown to
// fail with a broker.Push that sends one statement per queue (500 + 0).
func TestServeKilledMidPushAllOrNone(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	bin := buildPgquectl(t)
	br := newSoakBroker(t, "K", bin, dsn)
	br.start()
	client := &http.Client{Timeout: 60 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Create both queues.
	if code, err := soakPost(ctx, client, br.url()+"/api/v1/push",
		[]byte(`{"items":[{"queue":"kill_a","payload":0,"transactionId":"seed"},{"queue":"kill_b","payload":0,"transactionId":"seed"}]}`), nil); err != nil || code != 201 {
		t.Fatalf("seed push: %d %v", code, err)
	}
	conn := pgtest.Conn(t, dsn)
	var table string
	if err := conn.QueryRow(ctx, `SELECT pgque.event_table(queue_id, queue_cur_table) FROM pgque.queue WHERE queue_name = 'kill_b'`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}

	type item struct {
		Queue         string `json:"queue"`
		Partition     string `json:"partition"`
		Payload       int    `json:"payload"`
		TransactionID string `json:"transactionId"`
	}
	var items []item
	for i := range 1000 {
		q := "kill_a"
		if i >= 500 {
			q = "kill_b"
		}
		items = append(items, item{Queue: q, Partition: fmt.Sprintf("k%d", i%7), Payload: i, TransactionID: fmt.Sprintf("big-%d", i)})
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	pushed := make(chan error, 1)
	go func() {
		code, err := soakPost(ctx, client, br.url()+"/api/v1/push", body, nil)
		if err == nil {
			err = fmt.Errorf("answered %d", code)
		}
		pushed <- err
	}()

	// The push's backend waits for the lock: kill the broker then.
	other := pgtest.Conn(t, dsn)
	var pid int32
	for {
		err := other.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'pgquectl serve'
			  AND wait_event_type = 'Lock' AND query LIKE '%pgque.push%'`).Scan(&pid)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		select {
		case err := <-pushed:
			t.Fatalf("the push finished while its table was locked: %v", err)
		case <-ctx.Done():
			t.Fatal("the push never blocked on the locked event table")
		case <-time.After(20 * time.Millisecond):
		}
	}
	br.kill()
	if err := <-pushed; err == nil || strings.HasPrefix(err.Error(), "answered") {
		t.Fatalf("the client of the killed broker got an answer: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait until the orphaned backend has ended (committed or aborted).
	for {
		var n int
		if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the killed broker's backend %d is still there", pid)
		case <-time.After(50 * time.Millisecond):
		}
	}
	na, nb := len(countEvents(t, dsn, "kill_a", "big-")), len(countEvents(t, dsn, "kill_b", "big-"))
	var dd int
	if err := other.QueryRow(ctx, `SELECT count(*) FROM pgque.dedup WHERE dd_txn LIKE 'big-%'`).Scan(&dd); err != nil {
		t.Fatal(err)
	}
	t.Logf("after the kill: %d events in kill_a, %d in kill_b, %d dedup records", na, nb, dd)
	if !(na == 0 && nb == 0 && dd == 0) && !(na == 500 && nb == 500 && dd == 1000) {
		t.Fatalf("a push killed mid-statement left %d + %d events and %d dedup records: want all (500 + 500, 1000) or none", na, nb, dd)
	}
}

// brokerTickOnlyPair makes a database and two brokers on it (not started)
// whose broker-driven ticks are the only ones: no standby ticker on either
// (it would tick the queue itself), no pg_cron job, no daemon.
func brokerTickOnlyPair(t *testing.T) (a, b *soakBroker) {
	t.Helper()
	dsn := pgtest.NewDB(t)
	bin := buildPgquectl(t)
	a = newSoakBroker(t, "A", bin, dsn)
	b = newSoakBroker(t, "B", bin, dsn)
	a.args = []string{"--standby-ticker=false"}
	b.args = a.args
	return a, b
}

// A push answered 201 by a broker that is SIGKILLed right after is
// poppable through the other broker, with nothing else ticking (no pg_cron
// job, no daemon, no later push to that queue): the answer waits for the
// broker-driven tick. Before, the tick ran after the answer and died with
// the broker: the message stayed invisible (3 of 3 here).
func TestServeAckedPushVisibleAfterBrokerKill(t *testing.T) {
	t.Parallel()
	a, b := brokerTickOnlyPair(t)
	a.start()
	client := &http.Client{Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 3 {
		b.start()
		q := fmt.Sprintf("killed_after_push_%d", i)
		var res []struct {
			MessageID string `json:"message_id"`
		}
		code, err := soakPost(ctx, client, b.url()+"/api/v1/push", []byte(`{"items":[{"queue":"`+q+`","payload":{"i":1}}]}`), &res)
		if err != nil || code != http.StatusCreated || len(res) != 1 {
			t.Fatalf("push %d: %d %v", i, code, err)
		}
		b.kill()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url()+"/api/v1/pop/queue/"+q+"?wait=true&timeout=5000&autoAck=true", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var pop struct {
			Messages []soakPopMsg `json:"messages"`
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("push %d acknowledged by the killed broker: pop through the other answered %d within 5 s", i, resp.StatusCode)
		}
		if err := json.Unmarshal(data, &pop); err != nil || len(pop.Messages) != 1 || pop.Messages[0].ID != res[0].MessageID {
			t.Fatalf("push %d: pop answered %s (%v), want message %s", i, data, err, res[0].MessageID)
		}
	}
}

// A dead letter replayed through a broker that is SIGKILLed right after
// answering is poppable (by its group) through the other broker: the
// replay's answer waits for its tick like a push's. Everything else goes
// through A, so B's pool has to open a connection for the tick (as the
// push test's fresh B does), which the kill then beats.
func TestServeReplayVisibleAfterBrokerKill(t *testing.T) {
	t.Parallel()
	a, b := brokerTickOnlyPair(t)
	a.start()
	b.start()
	client := &http.Client{Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	get := func(url string, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK && out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("GET %s: %s: %v", url, data, err)
			}
		}
		return resp.StatusCode
	}
	if code, err := soakPost(ctx, client, a.url()+"/api/v1/push", []byte(`{"items":[{"queue":"rq","payload":{"i":1}}]}`), nil); err != nil || code != 201 {
		t.Fatalf("push: %d %v", code, err)
	}
	var pop struct {
		Messages []soakPopMsg `json:"messages"`
	}
	if code := get(a.url()+"/api/v1/pop/queue/rq?consumerGroup=g&subscriptionMode=all&wait=true&timeout=5000", &pop); code != 200 || len(pop.Messages) != 1 {
		t.Fatalf("pop: %d %+v", code, pop)
	}
	m := pop.Messages[0]
	ack := fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"leaseId":%q,"consumerGroup":"g","status":"dlq"}`, m.TransactionID, m.PartitionID, m.LeaseID)
	if code, err := soakPost(ctx, client, a.url()+"/api/v1/ack", []byte(ack), nil); err != nil || code != 200 {
		t.Fatalf("ack dlq: %d %v", code, err)
	}
	var dlq struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if code := get(a.url()+"/api/v1/dlq?queue=rq&consumerGroup=g", &dlq); code != 200 || len(dlq.Messages) != 1 {
		t.Fatalf("dlq list: %d %+v", code, dlq)
	}
	if code, err := soakPost(ctx, client, b.url()+"/api/v1/dlq/"+dlq.Messages[0].ID+"/replay", nil, nil); err != nil || code != 200 {
		t.Fatalf("replay: %d %v", code, err)
	}
	b.kill()
	var again struct {
		Messages []soakPopMsg `json:"messages"`
	}
	code := get(a.url()+"/api/v1/pop/queue/rq?consumerGroup=g&wait=true&timeout=5000&autoAck=true", &again)
	if code != http.StatusOK || len(again.Messages) != 1 || again.Messages[0].TransactionID != m.TransactionID {
		t.Fatalf("replayed through the killed broker: pop through the other answered %d %+v within 5 s", code, again)
	}
}
