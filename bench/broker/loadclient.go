package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The latency cells' load runs in a process of its own: this binary
// started again with loadClientArg, one process per cell. Its CPU time is
// then the client's alone (the harness's own work - pg_stat_statements,
// CHECKPOINT, /proc readings, profiles - is in another account), and it
// runs with GOMAXPROCS=1, as a Queen client in JavaScript runs one event
// loop on one thread (its sockets: rawsock_linux.go).
//
// What it does is what Queen's clients do over HTTP: one POST
// /api/v1/push per one-message push, sent on schedule (open loop) over
// kept-alive connections (a new connection only when every one has a push
// in flight); each consumer long-polls the wildcard pop and acks what it
// got with POST /api/v1/ack/batch before its next pop. Per message it
// records when its push was sent and answered and when a pop returned it.
//
// The parent talks to it over stdin / stdout, one line each:
//
//	parent: the loadSpec (JSON)
//	client: {"event":"ready"}   consumers parked, the warm-up message popped
//	parent: go                  (the parent read the CPU and WAL counters)
//	client: {"event":"done"}    producer stopped, drained, consumers stopped
//	parent: report              (the parent read the counters again)
//	client: the loadResult (JSON), then exits
//
// Stdin's end (the parent stopped or died) stops the load at once.

// loadClientArg is the argument that makes this binary the load client.
const loadClientArg = "__latency-load-client"

// loadSpec is what the load client runs.
type loadSpec struct {
	PushURL    string        `json:"push_url"`
	PopURL     string        `json:"pop_url"`
	Queue      string        `json:"queue"`
	Rate       int           `json:"rate"`
	Duration   time.Duration `json:"duration"`
	Partitions int           `json:"partitions"`
	Consumers  int           `json:"consumers"`
	Drain      time.Duration `json:"drain"`
	// CPUProfile, when set, receives the client's CPU profile from "go"
	// to "done".
	CPUProfile string `json:"cpu_profile,omitempty"`
	// TransactionIDs: every pushed item carries a random UUID as its
	// transactionId, as Queen's JS client sends (the broker then checks it
	// against its dedup records).
	TransactionIDs bool `json:"transaction_ids,omitempty"`
}

// loadResult is what it measured (the Cell fields of a latency cell).
type loadResult struct {
	Seconds     float64          `json:"seconds"`
	Pushed      int64            `json:"pushed"`
	Consumed    int64            `json:"consumed"`
	Pops        int64            `json:"pops"`
	PopsWithMsg int64            `json:"pops_with_messages"`
	Errors      int64            `json:"errors"`
	Duplicates  int64            `json:"duplicates"`
	Late        int64            `json:"late"`
	Missing     int64            `json:"missing"`
	BeforeAck   int64            `json:"before_ack"`
	Latency     *Dist            `json:"latency"`
	SendLatency *Dist            `json:"send_latency"`
	PushRequest *Dist            `json:"push_request"`
	PopRequest  *Dist            `json:"pop_request"`
	Steps       map[string]*Dist `json:"steps"`
}

// loadEvent is a line of the client's protocol.
type loadEvent struct {
	Event string `json:"event"`
}

// producerSlots bounds the pushes in flight (one connection each). The
// producer is open-loop: it must keep sending at its rate while the
// broker is slow to answer, or the cell measures the producer's window
// instead of the broker. 4,096 slots hold four seconds of answers at
// 1,000/s (256 held a quarter second: under load the producer fell to ~250
// msg/s and the cell ran at a quarter of its rate).
const producerSlots = 4096

// loadClientMain is the load client's main: it reads the spec and the
// commands from stdin and answers on stdout.
func loadClientMain(stdin io.Reader, stdout, stderr io.Writer) int {
	// The parent stops it by closing stdin; a terminal's ^C goes to the
	// parent (the client runs in its own process group anyway).
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	in := bufio.NewReader(stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(stderr, "load client: reading the spec:", err)
		return 2
	}
	var spec loadSpec
	if err := json.Unmarshal(line, &spec); err != nil {
		fmt.Fprintln(stderr, "load client: decoding the spec:", err)
		return 2
	}
	// Commands arrive on cmds; stdin's end cancels ctx.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmds := make(chan string, 2)
	go func() {
		defer cancel()
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				return
			}
			cmds <- string(line[:len(line)-1])
		}
	}()
	await := func(want string) error {
		select {
		case c := <-cmds:
			if c != want {
				return fmt.Errorf("got command %q, want %q", c, want)
			}
			return nil
		case <-ctx.Done():
			return errors.New("stdin closed")
		}
	}
	enc := json.NewEncoder(stdout)
	l, err := newLoadRun(spec)
	if err != nil {
		fmt.Fprintln(stderr, "load client:", err)
		return 1
	}
	res, err := l.run(ctx, func(event string) error {
		if err := enc.Encode(loadEvent{Event: event}); err != nil {
			return err
		}
		switch event {
		case "ready":
			return await("go")
		case "done":
			return await("report")
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(stderr, "load client:", err)
		return 1
	}
	if err := enc.Encode(res); err != nil {
		fmt.Fprintln(stderr, "load client: writing the result:", err)
		return 1
	}
	return 0
}

// loadRun is one latency cell's load.
type loadRun struct {
	spec       loadSpec
	pushHost   string
	popHost    string
	n          int      // messages scheduled
	partitions []string // partition names
	// Per message (index = seq): push sent, push answered (0: failed or
	// never sent), first popped (UnixNano), and the push's database time
	// (Server-Timing "db", written by the push's worker before its
	// WaitGroup.Done).
	sent, acked, recv []atomic.Int64
	pushDB            []float64
	measuring         atomic.Bool
	stopping          atomic.Bool // consumers stop between requests
	dups, warm, late  atomic.Int64
	pushed, perrs     atomic.Int64
}

func newLoadRun(spec loadSpec) (*loadRun, error) {
	if spec.Rate <= 0 || spec.Duration <= 0 || spec.Partitions <= 0 || spec.Consumers <= 0 {
		return nil, fmt.Errorf("spec: rate, duration, partitions and consumers must be positive: %+v", spec)
	}
	pushHost, err := hostOf(spec.PushURL)
	if err != nil {
		return nil, err
	}
	popHost, err := hostOf(spec.PopURL)
	if err != nil {
		return nil, err
	}
	n := int(int64(spec.Rate) * int64(spec.Duration) / int64(time.Second))
	l := &loadRun{spec: spec, pushHost: pushHost, popHost: popHost, n: n,
		sent: make([]atomic.Int64, n), acked: make([]atomic.Int64, n), recv: make([]atomic.Int64, n), pushDB: make([]float64, n)}
	for i := range spec.Partitions {
		l.partitions = append(l.partitions, fmt.Sprintf("k%02d", i))
	}
	return l, nil
}

// consumerStats are one consumer's counters while measuring (no sharing:
// merged at the end).
type consumerStats struct {
	pops, popsWithMsg, consumed, errors int64
	popMs, popDB, popPark, ackMs        []float64
}

// run runs the cell; step reports "ready" and "done" and returns when the
// parent's next command came.
func (l *loadRun) run(ctx context.Context, step func(string) error) (*loadResult, error) {
	var cwg sync.WaitGroup
	stats := make([]consumerStats, l.spec.Consumers)
	for k := range stats {
		cwg.Add(1)
		go func() { defer cwg.Done(); l.consume(ctx, &stats[k]) }()
	}
	stopConsumers := func() { l.stopping.Store(true); cwg.Wait() }
	defer stopConsumers()
	if err := l.warmUp(ctx); err != nil {
		return nil, err
	}
	if err := step("ready"); err != nil {
		return nil, err
	}
	var prof *os.File
	if l.spec.CPUProfile != "" {
		f, err := os.Create(l.spec.CPUProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return nil, err
		}
		prof = f
	}
	l.measuring.Store(true)
	elapsed := l.produce(ctx)
	l.drain(ctx)
	l.measuring.Store(false)
	stopConsumers()
	if prof != nil {
		pprof.StopCPUProfile()
		if err := prof.Close(); err != nil {
			return nil, err
		}
	}
	if err := step("done"); err != nil {
		return nil, err
	}
	return l.result(elapsed, stats), nil
}

// produce sends one push per message on schedule until the cell's end
// and waits for the answers; it returns the time it ran. A push goes to a
// worker that is idle (each owns one connection); when none is, a new
// worker starts, up to producerSlots.
func (l *loadRun) produce(ctx context.Context) time.Duration {
	interval := time.Second / time.Duration(l.spec.Rate)
	jobs := make(chan int) // unbuffered: a send succeeds only into an idle worker
	var wg sync.WaitGroup
	workers := 0
	start := time.Now()
	end := start.Add(l.spec.Duration)
	// The schedule ends at the cell's end even when the producer fell
	// behind it (fewer than n pushes then).
	for i := 0; i < l.n && ctx.Err() == nil; i++ {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		if d := start.Add(time.Duration(i) * interval).Sub(now); d > 0 {
			time.Sleep(d)
		}
		select {
		case jobs <- i:
			continue
		default:
		}
		if workers < producerSlots {
			workers++
			wg.Add(1)
			go func() { defer wg.Done(); l.pushWorker(ctx, i, jobs) }()
			continue
		}
		l.late.Add(1) // every slot has a push in flight: the producer falls behind
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return time.Since(start)
}

// pushWorker pushes message first, then every message handed to it, on
// one kept-alive connection.
func (l *loadRun) pushWorker(ctx context.Context, first int, jobs <-chan int) {
	var h *httpConn
	var body []byte
	var rnd *rand.ChaCha8
	if l.spec.TransactionIDs {
		var seed [32]byte
		_, _ = crand.Read(seed[:])
		rnd = rand.NewChaCha8(seed)
	}
	push := func(i int) {
		if h == nil {
			var err error
			if h, err = dialConn(ctx, l.pushHost); err != nil {
				l.perrs.Add(1)
				return
			}
		}
		items := [1]pushItem{{Queue: l.spec.Queue, Partition: l.partitions[i%len(l.partitions)], Seq: int64(i), Body: payloadBody}}
		if rnd != nil {
			items[0].TxID = newUUID4(rnd.Uint64(), rnd.Uint64())
		}
		body = appendPushBody(body[:0], items[:])
		t0 := time.Now()
		l.sent[i].Store(t0.UnixNano())
		a, reuse, err := h.do(http.MethodPost, "/api/v1/push", body)
		t1 := time.Now()
		if err == nil {
			_, err = pushAnswer(a)
		}
		if err != nil || !reuse {
			h.close()
			h = nil
		}
		if err != nil {
			l.perrs.Add(1)
			return
		}
		l.acked[i].Store(t1.UnixNano())
		l.pushDB[i] = a.timing.db
		l.pushed.Add(1)
	}
	push(first)
	for i := range jobs {
		push(i)
	}
	if h != nil {
		h.close()
	}
}

// consume is one consumer: a long-polling wildcard pop, then an ack of
// what it returned, until stopping is set (the last pop finishes and is
// acked: a pop cut off after the broker leased a partition would leave it
// leased into the next cell).
func (l *loadRun) consume(ctx context.Context, st *consumerStats) {
	path := popPath(l.spec.Queue, popOpts{batch: 100, partitions: l.spec.Partitions, wait: true, timeout: time.Second})
	var h *httpConn
	var ackBody []byte
	fail := func(counted bool) {
		if counted {
			st.errors++
		}
		if h != nil {
			h.close()
			h = nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer func() {
		if h != nil {
			h.close()
		}
	}()
	for !l.stopping.Load() && ctx.Err() == nil {
		if h == nil {
			var err error
			if h, err = dialConn(ctx, l.popHost); err != nil {
				fail(l.measuring.Load())
				continue
			}
		}
		counted := l.measuring.Load()
		t0 := time.Now()
		a, reuse, err := h.do(http.MethodGet, path, nil)
		at := time.Now()
		var msgs []message
		if err == nil {
			msgs, err = popAnswer(a)
		}
		if err != nil {
			fail(counted)
			continue
		}
		if !reuse {
			h.close()
			h = nil
		}
		if counted {
			st.pops++
			st.popMs = append(st.popMs, msSub(at, t0))
			if len(msgs) > 0 {
				st.popsWithMsg++
				st.popDB = append(st.popDB, a.timing.db)
				st.popPark = append(st.popPark, a.timing.park)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		l.received(at.UnixNano(), msgs)
		if h == nil {
			if h, err = dialConn(ctx, l.popHost); err != nil {
				fail(counted)
				continue
			}
		}
		ackBody = appendAckBody(ackBody[:0], "", msgs)
		a0 := time.Now()
		a, reuse, err = h.do(http.MethodPost, "/api/v1/ack/batch", ackBody)
		a1 := time.Now()
		n := 0
		if err == nil {
			n, err = ackAnswer(a)
		}
		if err != nil {
			fail(counted)
			continue
		}
		if !reuse {
			h.close()
			h = nil
		}
		if counted {
			st.ackMs = append(st.ackMs, msSub(a1, a0))
			st.consumed += int64(n)
		}
	}
}

// received records the messages of a pop that returned at ns.
func (l *loadRun) received(ns int64, msgs []message) {
	for i := range msgs {
		p := msgs[i].Data.Seq
		switch {
		case p == nil:
		case *p < 0:
			l.warm.Add(1)
		case *p < int64(l.n):
			if !l.recv[*p].CompareAndSwap(0, ns) {
				l.dups.Add(1)
			}
		}
	}
}

// warmUp pushes one message with seq -1 and waits until a consumer saw it
// (the queue and the group exist and the consumers are parked).
func (l *loadRun) warmUp(ctx context.Context) error {
	h, err := dialConn(ctx, l.pushHost)
	if err != nil {
		return fmt.Errorf("warm-up push: %w", err)
	}
	defer h.close()
	items := [1]pushItem{{Queue: l.spec.Queue, Partition: l.partitions[0], Seq: -1}}
	if l.spec.TransactionIDs {
		items[0].TxID = newUUID4(rand.Uint64(), rand.Uint64())
	}
	a, _, err := h.do(http.MethodPost, "/api/v1/push", appendPushBody(nil, items[:]))
	if err == nil {
		_, err = pushAnswer(a)
	}
	if err != nil {
		return fmt.Errorf("warm-up push: %w", err)
	}
	for deadline := time.Now().Add(15 * time.Second); l.warm.Load() == 0; {
		if time.Now().After(deadline) {
			return errors.New("warm-up: the consumers did not get the first message within 15 s")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// drain waits (≤ Drain) until every answered push was popped. Messages
// checked once stay checked: the scan resumes where it stopped.
func (l *loadRun) drain(ctx context.Context) {
	from := 0
	for deadline := time.Now().Add(l.spec.Drain); ctx.Err() == nil; {
		for from < l.n && (l.acked[from].Load() == 0 || l.recv[from].Load() != 0) {
			from++
		}
		if from == l.n || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// result summarizes the run (after the parent's last CPU reading).
func (l *loadRun) result(elapsed time.Duration, stats []consumerStats) *loadResult {
	r := &loadResult{Seconds: elapsed.Seconds(), Pushed: l.pushed.Load(), Duplicates: l.dups.Load(), Late: l.late.Load(), Errors: l.perrs.Load()}
	var lat, sendLat, pushMs, pushDB []float64
	for i := range l.n {
		a, s, rc := l.acked[i].Load(), l.sent[i].Load(), l.recv[i].Load()
		if a == 0 {
			continue
		}
		pushMs = append(pushMs, float64(a-s)/float64(time.Millisecond))
		pushDB = append(pushDB, l.pushDB[i])
		if rc == 0 {
			r.Missing++
			continue
		}
		d := float64(rc-a) / float64(time.Millisecond)
		if d < 0 {
			r.BeforeAck++
			d = 0
		}
		lat = append(lat, d)
		sendLat = append(sendLat, float64(rc-s)/float64(time.Millisecond))
	}
	var popMs, popDB, popPark, ackMs []float64
	for _, st := range stats {
		r.Pops += st.pops
		r.PopsWithMsg += st.popsWithMsg
		r.Consumed += st.consumed
		r.Errors += st.errors
		popMs = append(popMs, st.popMs...)
		popDB = append(popDB, st.popDB...)
		popPark = append(popPark, st.popPark...)
		ackMs = append(ackMs, st.ackMs...)
	}
	r.Latency, r.SendLatency = summarize(lat), summarize(sendLat)
	r.PushRequest, r.PopRequest = summarize(pushMs), summarize(popMs)
	r.Steps = map[string]*Dist{"push_db": summarize(pushDB), "pop_db": summarize(popDB), "pop_park": summarize(popPark), "ack": summarize(ackMs)}
	return r
}

func msSub(a, b time.Time) float64 { return float64(a.Sub(b)) / float64(time.Millisecond) }

// loadClient is the parent's handle on a running load client.
type loadClient struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	done  chan struct{}
}

// startLoadClient starts the load client for spec and waits until it is
// ready (warmed up).
func startLoadClient(ctx context.Context, spec loadSpec, stderr io.Writer) (*loadClient, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start the load client: %w", err)
	}
	cmd := exec.Command(exe, loadClientArg)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	if stderr == nil {
		stderr = os.Stderr
	}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the load client: %w", err)
	}
	lc := &loadClient{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), done: make(chan struct{})}
	// The parent's end (a signal) stops the client: its stdin closes.
	go func() {
		select {
		case <-ctx.Done():
			_ = stdin.Close()
		case <-lc.done:
		}
	}()
	raw, err := json.Marshal(spec)
	if err == nil {
		err = lc.send(string(raw))
	}
	if err == nil {
		err = lc.expect("ready")
	}
	if err != nil {
		lc.stop()
		return nil, err
	}
	return lc, nil
}

func (lc *loadClient) pid() int { return lc.cmd.Process.Pid }

func (lc *loadClient) send(line string) error {
	if _, err := io.WriteString(lc.stdin, line+"\n"); err != nil {
		return fmt.Errorf("writing to the load client: %w", err)
	}
	return nil
}

// expect reads the client's next line and checks it is the event want.
func (lc *loadClient) expect(want string) error {
	line, err := lc.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("the load client stopped before %q (its errors are on stderr): %w", want, err)
	}
	var ev loadEvent
	if err := json.Unmarshal(line, &ev); err != nil || ev.Event != want {
		return fmt.Errorf("the load client said %q, want event %q", line, want)
	}
	return nil
}

// report asks for the result and waits for the client's exit.
func (lc *loadClient) report() (*loadResult, error) {
	if err := lc.send("report"); err != nil {
		return nil, err
	}
	line, err := lc.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("reading the load client's result: %w", err)
	}
	var res loadResult
	if err := json.Unmarshal(line, &res); err != nil {
		return nil, fmt.Errorf("decoding the load client's result: %w", err)
	}
	return &res, nil
}

// stop closes the client's stdin (it stops its load and exits), and kills
// it when it has not exited within 15 s.
func (lc *loadClient) stop() {
	_ = lc.stdin.Close()
	exited := make(chan struct{})
	go func() { _ = lc.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = lc.cmd.Process.Kill()
		<-exited
	}
	close(lc.done)
}
