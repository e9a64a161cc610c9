package main

// The crash soak (issue 23): two `pgquectl serve` brokers on a private
// PostgreSQL cluster, producers and consumers in queue mode and two
// consumer groups, while brokers are SIGKILLed and PostgreSQL is crashed
// (pg_ctl -m immediate restart) every 20-40 s.

import (
	"context"
	"fmt"
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
// Verdict (soakRecord.violations): one stored event per transactionId
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

	run := newSoakRun(chaosQueue, chaosGroups, chaosMaxBacklog)
	run.pop5xx = true
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
					soakConsume(consCtx, t, client, run, br, c, g)
				}(c)
				c++
			}
		}
	}
	for p := range chaosProducers {
		producers.Add(1)
		go func() {
			defer producers.Done()
			soakProduce(prodCtx, hard, t, client, run, brokers, p)
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

	drained := run.drain(t, dsn, chaosDrainBudget, brokers)
	stopConsumers()
	consumers.Wait()

	run.mu.Lock()
	defer run.mu.Unlock()
	rec := run.rec
	rec.verdict(t)
	for _, e := range run.refusals {
		t.Logf("ack refused: %s", e)
	}

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
