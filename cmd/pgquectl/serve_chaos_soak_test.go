package main

// The crash soak (issue 23): two `pgquectl serve` brokers on a private
// PostgreSQL cluster, producers and consumers in queue mode and two
// consumer groups, while brokers are SIGKILLed and PostgreSQL is crashed
// (pg_ctl -m immediate restart) every 20-40 s.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

const (
	// EnvSoakDuration sets how long the crash soak injects crashes (a Go
	// duration; default 90s). EnvSoakSeed replays a run's schedule.
	EnvSoakDuration = "PGQUE_SOAK_DURATION"
	EnvSoakSeed     = "PGQUE_SOAK_SEED"

	chaosQueue       = "chaos"
	chaosProducers   = 4
	chaosMaxBacklog  = 400
	chaosMinCrashes  = 2 // of each kind, whatever the duration
	chaosDrainBudget = 2 * time.Minute
)

// chaosGroups: queue mode ("" = __QUEUE_MODE__) and two consumer groups.
var chaosGroups = []string{"", "g1", "g2"}

// chaosRecord is what the soak saw, and what its verdict is computed from.
type chaosRecord struct {
	attempted map[string]bool      // txn ids pushed (acknowledged or not)
	acked     map[string]string    // txn id -> message id of a push answered 2xx
	stored    map[string]int       // txn id -> events stored (after the run)
	delivered []soakDelivery       // every pop answer's messages, in receipt order
	ackedAt   map[string]time.Time // group/txn -> when a successful ack of it answered
}

// chaosRun is the shared, locked state of a running soak.
type chaosRun struct {
	mu  sync.Mutex
	seq int64
	rec chaosRecord
	// counters for the report
	pushes, pushErrs, dups int
	pushCodes              map[int]int // non-2xx push answers by status
	popCodes               map[int]int // non-200/204 pop answers by status
	popErrs, ackErrs       int         // connection errors
	ackCodes               map[int]int // non-200 ack answers by status
	ackRefused, ackLost    int         // success:false items; batches given up
	firsts                 map[string]map[string]bool
}

func (r *chaosRun) backlog() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	least := len(r.rec.acked)
	for _, g := range chaosGroups {
		least = min(least, len(r.firsts[g]))
	}
	return len(r.rec.acked) - least
}

// TestServeSoakCrashes is the crash soak: 4 producers and 12 consumers (2
// per broker in each of queue mode, g1 and g2; 3 s leases) through two
// brokers on a private cluster. Every 20-40 s (randomized, two independent
// schedules, one event at a time) a random broker is SIGKILLed and
// restarted on its port after 0.5-2 s, or PostgreSQL is crashed and
// restarted (pg_ctl -m immediate restart). The first event of each kind
// comes within 5-20 s, so the default 90 s sees at least 2 of each; the
// crash phase lasts PGQUE_SOAK_DURATION (default 90s) and at least that.
// PGQUE_SOAK_SEED replays a schedule (the seed is logged).
//
// Ticking is the brokers' own: a broker-driven tick per push, and the
// standby ticker each broker runs (no pg_cron job in the soak database):
// it ticks what a push committed but could not tick (its broker or the
// database died before the answer), and restarts with its broker and
// reconnects after PostgreSQL.
//
// Producers push batches of 5 over their 4 partitions and retry a push
// that failed (connection error, 5xx) with the same transactionIds on the
// other broker until one is answered 2xx: that push counts as acknowledged.
// Consumers long-poll their broker, retry its errors, and ack a batch
// (completed) until shortly before its lease ends; a batch whose ack never
// got through comes back when its lease expires.
//
// Verdict (chaosRecord.violations): one stored event per transactionId
// and every acknowledged push stored; every stored event delivered to
// every group (queue mode included) with the id its push was answered;
// nothing delivered again after an ack of it succeeded, nor while a lease
// on it was live, nor with a delivery attempt that did not grow; in each
// partition and group, first deliveries in push order. The test then
// checks that the verdict catches each of these on a copy of the record
// with one defect planted (a lost message, two deliveries swapped, one
// after its ack, one under a live lease, an event stored twice, an
// acknowledged push not stored): a checker that passes everything fails.
//
// Shown to fail: with the brokers' sessions on synchronous_commit = off
// (5 acknowledged pushes lost in 30 s, messages delivered again after
// their ack succeeded) and with dedup off (dedupWindowSeconds 0: retried
// pushes stored twice).
//
//	PGQUE_SOAK_DURATION=5m go test -count=1 -v -timeout 20m -run TestServeSoakCrashes ./cmd/pgquectl/
func TestServeSoakCrashes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	duration := 90 * time.Second
	if v := os.Getenv(EnvSoakDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a Go duration such as 5m", EnvSoakDuration, v)
		}
		duration = d
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(EnvSoakSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", EnvSoakSeed, v)
		}
		seed = s
	}
	t.Logf("crash soak: %v of crashes, seed %d (%s=%d replays the schedule)", duration, seed, EnvSoakSeed, seed)
	rng := rand.New(rand.NewPCG(seed, 23))

	cluster := pgtest.PrivateCluster(t)
	pgtest.Exec(t, cluster.DSN("postgres"), `CREATE DATABASE soak`)
	dsn := cluster.DSN("soak")
	pgtest.InstallEngine(t, dsn)
	bin := buildPgquectl(t)
	brokers := []*soakBroker{newSoakBroker(t, "A", bin, dsn), newSoakBroker(t, "B", bin, dsn)}
	for _, br := range brokers {
		br.start()
	}
	start := time.Now()

	run := &chaosRun{
		rec:       chaosRecord{attempted: map[string]bool{}, acked: map[string]string{}, ackedAt: map[string]time.Time{}},
		pushCodes: map[int]int{}, popCodes: map[int]int{}, ackCodes: map[int]int{}, firsts: map[string]map[string]bool{},
	}
	for _, g := range chaosGroups {
		run.firsts[g] = map[string]bool{}
	}
	client := &http.Client{Timeout: 15 * time.Second}
	hard, cancelHard := context.WithTimeout(context.Background(), duration+chaosDrainBudget+3*time.Minute)
	prodCtx, stopProducers := context.WithCancel(hard)
	consCtx, stopConsumers := context.WithCancel(hard)
	var producers, consumers sync.WaitGroup
	// Whatever ends the test, no goroutine outlives it.
	defer func() {
		stopProducers()
		stopConsumers()
		cancelHard()
		producers.Wait()
		consumers.Wait()
	}()

	c := 0
	for _, g := range chaosGroups {
		for _, br := range brokers {
			for range 2 {
				consumers.Add(1)
				go func(c int) {
					defer consumers.Done()
					chaosConsume(consCtx, t, client, run, br, c, g)
				}(c)
				c++
			}
		}
	}
	for p := range chaosProducers {
		producers.Add(1)
		go func() {
			defer producers.Done()
			chaosProduce(prodCtx, hard, t, client, run, brokers, p)
		}()
	}

	// The crashes, one at a time from this goroutine (a broker restarted
	// while PostgreSQL is down would not start).
	between := func() time.Duration { return 20*time.Second + time.Duration(rng.Int64N(int64(20*time.Second))) }
	nextKill := start.Add(5*time.Second + time.Duration(rng.Int64N(int64(15*time.Second))))
	nextCrash := start.Add(5*time.Second + time.Duration(rng.Int64N(int64(15*time.Second))))
	kills, crashes := map[string]int{}, 0
	for {
		nkills := kills["A"] + kills["B"]
		if time.Since(start) >= duration && nkills >= chaosMinCrashes && crashes >= chaosMinCrashes {
			break
		}
		next := nextKill
		if nextCrash.Before(next) {
			next = nextCrash
		}
		if end := start.Add(duration); next.After(end) && nkills >= chaosMinCrashes && crashes >= chaosMinCrashes {
			time.Sleep(time.Until(end))
			break
		}
		time.Sleep(time.Until(next))
		if next.Equal(nextKill) {
			br := brokers[rng.IntN(len(brokers))]
			at := time.Since(start)
			br.kill()
			pause := 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
			time.Sleep(pause)
			br.start()
			kills[br.name]++
			t.Logf("%7.1fs: broker %s SIGKILLed, restarted %v later", at.Seconds(), br.name, time.Since(start)-at)
			nextKill = time.Now().Add(between())
		} else {
			at := time.Since(start)
			ctx, cancel := context.WithTimeout(hard, 2*time.Minute)
			err := cluster.CrashRestart(ctx)
			cancel()
			if err != nil {
				t.Fatalf("crashing PostgreSQL: %v", err)
			}
			crashes++
			t.Logf("%7.1fs: PostgreSQL crashed (pg_ctl -m immediate restart), back %v later", at.Seconds(), time.Since(start)-at)
			nextCrash = time.Now().Add(between())
		}
	}
	// A few seconds without crashes, then the producers finish their push
	// in flight (retried until acknowledged) and stop.
	time.Sleep(3 * time.Second)
	stopProducers()
	producers.Wait()
	crashPhase := time.Since(start)
	if t.Failed() {
		return
	}

	stored := countEvents(t, dsn, chaosQueue, "")
	run.mu.Lock()
	run.rec.stored = stored
	run.mu.Unlock()
	drainStart := time.Now()
	for {
		missing := run.missing()
		if missing == "" {
			break
		}
		if time.Since(drainStart) > chaosDrainBudget {
			// Go on: the verdict says more.
			t.Errorf("after a %v drain: %s\nbroker A log:\n%s\nbroker B log:\n%s", chaosDrainBudget, missing, brokers[0].logTail(), brokers[1].logTail())
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	drained := time.Since(drainStart)
	stopConsumers()
	consumers.Wait()

	run.mu.Lock()
	defer run.mu.Unlock()
	rec := run.rec
	// Each kind of violation: its count and its first 5.
	byKind := map[string][]string{}
	var kinds []string
	for _, s := range rec.violations() {
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
	chaosSelfCheck(t, rec)

	// The report.
	type groupStats struct{ distinct, deliveries int }
	per := map[string]*groupStats{}
	for _, g := range chaosGroups {
		per[g] = &groupStats{}
	}
	seen := map[string]bool{}
	for _, d := range rec.delivered {
		per[d.group].deliveries++
		if k := d.group + "/" + d.txn; !seen[k] {
			seen[k] = true
			per[d.group].distinct++
		}
	}
	var groups []string
	for _, g := range chaosGroups {
		name := g
		if g == "" {
			name = "__QUEUE_MODE__"
		}
		groups = append(groups, fmt.Sprintf("%s %d (+%d redeliveries)", name, per[g].distinct, per[g].deliveries-per[g].distinct))
	}
	t.Logf("crash soak totals (seed %d): %v of crashes: %d broker kills (A %d, B %d), %d PostgreSQL crashes; "+
		"pushes: %d items attempted, %d acknowledged (%d answered duplicate after a retry), %d stored; "+
		"%d push calls, %d failed and retried (connection errors %d, by status %v); "+
		"delivered per group: %s; pops failed: connection %d, by status %v; "+
		"acks: %d successful, %d items refused, %d batches given up (connection errors %d, by status %v); "+
		"drained in %v, %v in all",
		seed, crashPhase.Round(time.Second), kills["A"]+kills["B"], kills["A"], kills["B"], crashes,
		len(rec.attempted), len(rec.acked), run.dups, len(rec.stored),
		run.pushes, run.pushErrs, run.pushErrs-sumCodes(run.pushCodes), run.pushCodes,
		strings.Join(groups, ", "), run.popErrs, run.popCodes,
		len(rec.ackedAt), run.ackRefused, run.ackLost, run.ackErrs, run.ackCodes,
		drained.Round(time.Millisecond), time.Since(start).Round(time.Second))
	for _, br := range brokers {
		for _, line := range brokerFailures(br) {
			t.Logf("broker %s: %s", br.name, line)
		}
	}
	if kills["A"]+kills["B"] < chaosMinCrashes || crashes < chaosMinCrashes {
		t.Errorf("%d broker kills and %d PostgreSQL crashes: want at least %d of each", kills["A"]+kills["B"], crashes, chaosMinCrashes)
	}
	if len(rec.acked) == 0 || len(rec.ackedAt) == 0 {
		t.Errorf("nothing acknowledged (%d pushes) or nothing acked (%d): the soak tested nothing", len(rec.acked), len(rec.ackedAt))
	}
}

// brokerFailures summarizes the 5xx answers in a broker's log: per route
// and status, and per error (digits as N), with counts, most frequent
// first.
func brokerFailures(br *soakBroker) []string {
	data, _ := os.ReadFile(br.log)
	byStatus, byErr := map[string]int{}, map[string]int{}
	for _, l := range strings.Split(string(data), "\n") {
		if m := accessLine.FindStringSubmatch(l); m != nil && m[2][0] == '5' {
			byStatus[m[1]+" "+m[2]]++
		}
		if m := failedLine.FindStringSubmatch(l); m != nil {
			byErr[digits.ReplaceAllString(m[1], "N")]++
		}
	}
	var out []string
	for _, m := range []map[string]int{byStatus, byErr} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
		for i, k := range keys {
			if i == 12 {
				out = append(out, fmt.Sprintf("... %d more kinds", len(keys)-i))
				break
			}
			out = append(out, fmt.Sprintf("%5d x %s", m[k], k))
		}
	}
	return out
}

var (
	accessLine = regexp.MustCompile(`msg=http .*route=("[^"]*"|\S+) status=(\d+)`)
	failedLine = regexp.MustCompile(`msg="request failed" .*?err=("(?:[^"\\]|\\.)*"|\S+)`)
	digits     = regexp.MustCompile(`\d+`)
)

func sumCodes(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// missing says what the drain still waits for ("" = nothing): stored
// events not yet delivered in a group (an acknowledged push that was not
// stored never comes: the verdict reports it).
func (r *chaosRun) missing() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, g := range chaosGroups {
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
	return strings.Join(out, "; ")
}

// violations lists everything wrong in the record (the checks are listed
// in TestServeSoakCrashes' comment), sorted; each line starts with its
// kind ("never delivered: ", "out of order: " ...).
func (r chaosRecord) violations() []string {
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
		for _, g := range chaosGroups {
			if _, ok := first[key{g, txn}]; !ok {
				add("never delivered: %s (stored) not delivered to %q", txn, g)
			}
		}
	}
	for txn := range r.acked {
		if r.stored[txn] != 0 {
			continue // reported above if not delivered
		}
		for _, g := range chaosGroups {
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
	sort.Strings(out)
	return out
}

// chaosSelfCheck plants one defect at a time in a copy of a clean record
// and fails unless violations reports it: the verdict can fail.
func chaosSelfCheck(t *testing.T, rec chaosRecord) {
	t.Helper()
	clone := func() chaosRecord {
		c := chaosRecord{attempted: rec.attempted, acked: map[string]string{}, stored: map[string]int{},
			delivered: append([]soakDelivery(nil), rec.delivered...), ackedAt: map[string]time.Time{}}
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
	// One acknowledged, acked message of group g2 and one pair of
	// consecutive first deliveries of one partition.
	var victim soakDelivery
	found := false
	for _, d := range rec.delivered {
		if _, ok := rec.ackedAt[d.group+"/"+d.txn]; ok && d.group == "g2" && rec.acked[d.txn] != "" {
			victim, found = d, true
			break
		}
	}
	if !found {
		t.Errorf("self-check: no acked delivery in g2 to plant defects on")
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
		plant      func(*chaosRecord)
	}{
		{"lose a message of g2", "never delivered: " + victim.txn, func(r *chaosRecord) {
			kept := r.delivered[:0]
			for _, d := range r.delivered {
				if !(d.group == victim.group && d.txn == victim.txn) {
					kept = append(kept, d)
				}
			}
			r.delivered = kept
		}},
		{"deliver one again after its ack", "after its ack: " + victim.txn, func(r *chaosRecord) {
			d := victim
			d.at = rec.ackedAt[d.group+"/"+d.txn].Add(time.Second)
			d.asked, d.attempt = d.at.Add(-10*time.Second), d.attempt+1
			r.delivered = append(r.delivered, d)
		}},
		{"deliver one again under its lease", "under a live lease: " + victim.txn, func(r *chaosRecord) {
			d := victim
			d.at, d.attempt = d.asked.Add(time.Second), d.attempt+1
			r.delivered = append(r.delivered, d)
		}},
		{"deliver one again without counting the attempt", "attempt not counted: " + victim.txn, func(r *chaosRecord) {
			d := victim
			d.at = d.asked.Add(10 * time.Second)
			r.delivered = append(r.delivered, d)
		}},
		{"store one twice", "stored twice: transaction id " + victim.txn, func(r *chaosRecord) { r.stored[victim.txn] = 2 }},
		{"lose an acknowledged push", "push lost: " + victim.txn, func(r *chaosRecord) { delete(r.stored, victim.txn) }},
		{"swap two first deliveries of a partition", "out of order: ", func(r *chaosRecord) {
			if pair[0] >= 0 {
				r.delivered[pair[0]], r.delivered[pair[1]] = r.delivered[pair[1]], r.delivered[pair[0]]
			}
		}},
	}
	if pair[0] < 0 {
		t.Errorf("self-check: no partition with two first deliveries in one group")
	}
	for _, p := range plants {
		r := clone()
		p.plant(&r)
		hit := false
		for _, v := range r.violations() {
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

// chaosProduce pushes batches of 5 items of producer p (sequence numbers
// over its 4 partitions). A push that failed is retried with the same
// transactionIds on the other broker until one answers 2xx.
func chaosProduce(ctx, hard context.Context, t *testing.T, client *http.Client, run *chaosRun, brokers []*soakBroker, p int) {
	seq, turn := 0, p
	for ctx.Err() == nil {
		if run.backlog() > chaosMaxBacklog {
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
			items = append(items, item{Queue: chaosQueue, Partition: fmt.Sprintf("p%d-k%d", p, seq%soakPartsPerProd),
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
				if len(res) != len(items) {
					t.Errorf("producer %d: push answered %d with %d results for %d items", p, code, len(res), len(items))
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

// chaosConsume long-polls broker br in group ("" = queue mode), records
// each delivery, "processes" it and acks the batch (completed). An odd
// consumer retries a failed ack until shortly before the lease ends; an
// even one gives the batch up at once (a client that moves on when its
// broker fails): the batch comes back when its lease expires.
func chaosConsume(ctx context.Context, t *testing.T, client *http.Client, run *chaosRun, br *soakBroker, c int, group string) {
	url := br.url() + "/api/v1/pop/queue/" + chaosQueue + fmt.Sprintf("?batch=10&wait=true&timeout=1000&leaseSeconds=%d", soakLeaseSeconds)
	if group != "" {
		url += "&consumerGroup=" + group + "&subscriptionMode=all"
	}
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
		case resp.StatusCode/100 == 5:
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
				txn: m.TransactionID, part: m.Partition, attempt: m.DeliveryAttempt, lease: m.LeaseID}
			run.seq++
			if err := json.Unmarshal(m.Data, &d.item); err != nil {
				t.Errorf("consumer %d: payload %s: %v", c, m.Data, err)
			}
			batch[i] = d
			run.rec.delivered = append(run.rec.delivered, d)
			run.firsts[group][d.txn] = true
		}
		run.mu.Unlock()
		time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond) // processing

		acks := make([]map[string]string, len(pop.Messages))
		for i, m := range pop.Messages {
			acks[i] = map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
				"leaseId": m.LeaseID, "status": "completed"}
		}
		body, _ := json.Marshal(map[string]any{"consumerGroup": group, "acknowledgments": acks})
		giveUp := now.Add(soakLeaseSeconds*time.Second - 500*time.Millisecond)
		for {
			var res []struct {
				Success bool `json:"success"`
			}
			code, err := soakPost(ctx, client, br.url()+"/api/v1/ack/batch", body, &res)
			answered := time.Now()
			run.mu.Lock()
			done := false
			switch {
			case err == nil && code == http.StatusOK && len(res) == len(batch):
				for i, r := range res {
					if !r.Success {
						run.ackRefused++
						continue
					}
					if _, ok := run.rec.ackedAt[group+"/"+batch[i].txn]; !ok {
						run.rec.ackedAt[group+"/"+batch[i].txn] = answered
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
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
