package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	peerHints  prometheus.Counter
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
	m.peerHints = prometheus.NewCounter(prometheus.CounterOpts{Name: "pgque_peer_hints_total",
		Help: "Wake hints received from other brokers (LISTEN/NOTIFY)."})
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.verdicts, m.popResults, m.pushes, m.acks, m.parked, m.wakes, m.peerHints} {
		f(c)
	}
	pool := s.pool
	gauge := func(name, help string, v func() float64) {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
	}
	gauge("pgque_pool_total_conns", "Connections in the pool.", func() float64 { return float64(pool.Stat().TotalConns()) })
	gauge("pgque_pool_acquired_conns", "Pool connections in use.", func() float64 { return float64(pool.Stat().AcquiredConns()) })
	gauge("pgque_pool_idle_conns", "Idle pool connections.", func() float64 { return float64(pool.Stat().IdleConns()) })
	gauge("pgque_pool_max_conns", "The pool's size limit.", func() float64 { return float64(pool.Stat().MaxConns()) })
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgque_pool_acquires_total", Help: "Pool acquisitions."},
		func() float64 { return float64(pool.Stat().AcquireCount()) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgque_pool_empty_acquires_total",
		Help: "Acquisitions that had to wait for a connection."}, func() float64 { return float64(pool.Stat().EmptyAcquireCount()) }))
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
