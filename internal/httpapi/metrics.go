package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/hotlist"
)

// metrics are the broker's Prometheus metrics, in a registry of the server
// (several servers in one process do not collide).
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	verdicts   *prometheus.CounterVec
	popResults *prometheus.CounterVec
	pushes     *prometheus.CounterVec
	acks       *prometheus.CounterVec
	parked     prometheus.Gauge
	wakes      prometheus.Counter
	checks     *prometheus.CounterVec
	peerHints  prometheus.Counter
	hotWakes   prometheus.Counter
	handler    http.Handler
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgque_http_requests_total",
		Help: "HTTP requests by route, method and status code."}, []string{"route", "method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pgque_http_request_duration_seconds",
		Help:    "HTTP request latency by route (long-poll waits included).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"route"})
	m.verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgque_pop_verdicts_total",
		Help: "Pop-list verdicts per evaluated candidate partition (took, empty, leased)."}, []string{"verdict"})
	m.popResults = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgque_pops_total",
		Help: "Pop requests by result (messages, empty)."}, []string{"result"})
	m.pushes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgque_pushed_messages_total",
		Help: "Pushed items by status (queued, duplicate)."}, []string{"status"})
	m.acks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgque_acks_total",
		Help: "Acknowledgments by status (completed, retry, failed, dlq) and success."}, []string{"status", "success"})
	m.parked = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgque_parked_pops",
		Help: "Long-poll pops parked right now (holding no database connection)."})
	m.wakes = prometheus.NewCounter(prometheus.CounterOpts{Name: "pgque_pop_wakes_total",
		Help: "Parked pops woken by a push to their queue (local or peer)."})
	m.checks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgque_pop_checks_total",
		Help: "Pop checks: run (asked the database or the candidate source) or shared (answered by another parked pop's check of the same queue and group)."}, []string{"kind"})
	m.peerHints = prometheus.NewCounter(prometheus.CounterOpts{Name: "pgque_peer_hints_total",
		Help: "Wake hints received from other brokers (LISTEN/NOTIFY)."})
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.verdicts, m.popResults, m.pushes, m.acks, m.parked, m.wakes, m.checks, m.peerHints} {
		f(c)
	}
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgque_push_waiting",
		Help: "Pushes waiting for a pgque.push call slot right now (they go out together in the next call)."},
		func() float64 { return float64(s.pusher.Waiting()) }))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgque_ack_waiting",
		Help: "Ack requests waiting for an ack transaction slot right now (they go out together in the next transaction)."},
		func() float64 { return float64(s.acker.Waiting()) }))
	for _, o := range []struct {
		name, help string
		v          func(broker.AckCombinerStats) int64
	}{
		{"pgque_ack_transactions_total", "Ack transactions (commits) run for the ack routes, each combining the requests that waited.", func(st broker.AckCombinerStats) int64 { return st.Transactions }},
		{"pgque_ack_statements_total", "pgque.group_ack calls in those transactions (one per tenant and consumer group).", func(st broker.AckCombinerStats) int64 { return st.Statements }},
		{"pgque_ack_requests_total", "Ack requests those transactions answered (requests per transaction: how much was combined).", func(st broker.AckCombinerStats) int64 { return st.Requests }},
	} {
		v := o.v
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: o.name, Help: o.help},
			func() float64 { return float64(v(s.acker.Stats())) }))
	}
	m.hotWakes = prometheus.NewCounter(prometheus.CounterOpts{Name: "pgque_hotlist_wakes_total",
		Help: "Parked wildcard pops woken by the hot-list (a mark, a due revisit, a promoted ack, a reseed that found work)."})
	if s.hot != nil {
		f(m.hotWakes)
	}
	pool := s.pool
	gauge := func(name, help string, v func() float64) {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
	}
	gauge("pgque_http_body_budget_used_bytes", "Part of --body-budget held by requests in flight (4 × their body size).",
		func() float64 { s.bodies.mu.Lock(); defer s.bodies.mu.Unlock(); return float64(s.bodies.used) })
	gauge("pgque_pool_total_conns", "Connections in the pool.", func() float64 { return float64(pool.Stat().TotalConns()) })
	gauge("pgque_pool_acquired_conns", "Pool connections in use.", func() float64 { return float64(pool.Stat().AcquiredConns()) })
	gauge("pgque_pool_idle_conns", "Idle pool connections.", func() float64 { return float64(pool.Stat().IdleConns()) })
	gauge("pgque_pool_max_conns", "The pool's size limit.", func() float64 { return float64(pool.Stat().MaxConns()) })
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgque_pool_acquires_total", Help: "Pool acquisitions."},
		func() float64 { return float64(pool.Stat().AcquireCount()) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgque_pool_empty_acquires_total",
		Help: "Acquisitions that had to wait for a connection."}, func() float64 { return float64(pool.Stat().EmptyAcquireCount()) }))
	if s.hot != nil {
		f(hotlistCollector{h: s.hot.HotList()})
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route, method string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

func (s *Server) prometheus(w http.ResponseWriter, r *http.Request) error {
	s.metrics.handler.ServeHTTP(w, r)
	return nil
}

// hotlistCollector exports the hot-list's Stats (one walk per scrape).
type hotlistCollector struct{ h *hotlist.HotList }

var (
	hlGauges = map[string]*prometheus.Desc{
		"queues":   prometheus.NewDesc("pgque_hotlist_queues", "Queues the hot-list holds state for.", nil, nil),
		"rings":    prometheus.NewDesc("pgque_hotlist_rings", "Hot-list rings ((queue, consumer group) pairs); shrinks with the idle sweep.", nil, nil),
		"ready":    prometheus.NewDesc("pgque_hotlist_ready", "Partitions listed ready (believed to have work).", nil, nil),
		"wheel":    prometheus.NewDesc("pgque_hotlist_wheel", "Partitions parked until a revisit time (leased, delayed, backing off).", nil, nil),
		"inflight": prometheus.NewDesc("pgque_hotlist_inflight", "Partitions checked out by pops in progress.", nil, nil),
		"hints":    prometheus.NewDesc("pgque_hotlist_hints_pending", "Dirty hints waiting to be sent to peer brokers.", nil, nil),
	}
	hlMarks    = prometheus.NewDesc("pgque_hotlist_marks_total", "Hot-list marks by origin (local: this broker's pushes, commits, replays; remote: peer hints).", []string{"origin"}, nil)
	hlReseeds  = prometheus.NewDesc("pgque_hotlist_reseeds_total", "Reseed scans run (the floor and cold rings).", nil, nil)
	hlRows     = prometheus.NewDesc("pgque_hotlist_reseed_rows_total", "Partitions returned by reseed scans.", nil, nil)
	hlErrors   = prometheus.NewDesc("pgque_hotlist_reseed_errors_total", "Reseed scans that failed.", nil, nil)
	hlVerdicts = prometheus.NewDesc("pgque_hotlist_verdicts_total", "Check-ins by verdict (took, empty, leased; none: not reached; released: put back by the drop guard).", []string{"verdict"}, nil)
	hlHints    = prometheus.NewDesc("pgque_hotlist_hints_total", "Peer hints by fate (sent, dropped, coalesced, received).", []string{"fate"}, nil)
	hlSwept    = prometheus.NewDesc("pgque_hotlist_swept_total", "Queues forgotten by the idle sweep.", nil, nil)
	hlRecl     = prometheus.NewDesc("pgque_hotlist_reclaimed_total", "Stranded check-outs reclaimed by a reseed (should stay 0).", nil, nil)
)

func (hotlistCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range hlGauges {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{hlMarks, hlReseeds, hlRows, hlErrors, hlVerdicts, hlHints, hlSwept, hlRecl} {
		ch <- d
	}
}

func (c hotlistCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.h.Stats()
	g := func(name string, v int) {
		ch <- prometheus.MustNewConstMetric(hlGauges[name], prometheus.GaugeValue, float64(v))
	}
	g("queues", st.Queues)
	g("rings", st.Rings)
	g("ready", st.Ready)
	g("wheel", st.Wheel)
	g("inflight", st.Inflight)
	g("hints", st.HintsPending)
	k := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	k(hlMarks, st.MarksLocal, "local")
	k(hlMarks, st.MarksRemote, "remote")
	k(hlReseeds, st.Reseeds)
	k(hlRows, st.ReseedRows)
	k(hlErrors, st.ReseedErrors)
	k(hlVerdicts, st.Took, "took")
	k(hlVerdicts, st.Empty, "empty")
	k(hlVerdicts, st.Leased, "leased")
	k(hlVerdicts, st.NoVerdict, "none")
	k(hlVerdicts, st.Released, "released")
	k(hlHints, st.HintsSent, "sent")
	k(hlHints, st.HintsDropped, "dropped")
	k(hlHints, st.HintsCoalesced, "coalesced")
	k(hlHints, st.HintsReceived, "received")
	k(hlSwept, st.Swept)
	k(hlRecl, st.Reclaimed)
}
