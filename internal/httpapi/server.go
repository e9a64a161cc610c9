// Package httpapi is the broker's HTTP server: the Queen v1 wire format
// (one route table, request / response types with validation, one error →
// status map) over internal/broker, with long-poll pops that hold no
// database connection while parked, broker-driven ticks, peer wake-ups
// through LISTEN/NOTIFY, optional JWT auth and Prometheus metrics.
// See docs/reference/http.md (the API) and docs/design/broker.md (inside).
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/hotlistpg"
	"github.com/pgquectl/pgquectl/internal/queuekey"
	"github.com/pgquectl/pgquectl/internal/wake"
)

// Defaults.
const (
	DefaultListen      = ":6632"
	DefaultBodyLimit   = 64 << 20
	DefaultLongPollMax = 30 * time.Second
	DefaultDrain       = 30 * time.Second
	// dbTimeout bounds every database call of a request.
	dbTimeout = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	// Pool runs every request's database call; the caller owns it (closes
	// it after Stop).
	Pool *pgxpool.Pool
	// Conn is used for the one dedicated LISTEN connection (peer wake-ups).
	// Zero DSN and no Pool config: peers off.
	Conn config.Connection
	// Peers enables LISTEN/NOTIFY between brokers on one database.
	Peers bool
	// Listen is host:port (DefaultListen when empty).
	Listen string
	// BodyLimit caps request bodies (413 above); 0 = DefaultBodyLimit.
	BodyLimit int64
	// BodyBudget caps the request bodies in flight, each charged 4 times
	// its size (the body and its decoded copies): past it, 503 with
	// Retry-After. 0 = DefaultBodyBudget; at least 4 × BodyLimit.
	BodyBudget int64
	// PushMaxItems caps the items of one push (of a transaction's pushes
	// together): 413 above. 0 = DefaultPushMaxItems.
	PushMaxItems int
	// ReadHeaderTimeout, ReadTimeout (the whole request, body included)
	// and IdleTimeout (keep-alive) of the HTTP server; 0 = the defaults.
	// WriteTimeout 0 = LongPollMax + 35 s (a parked pop's answer, after
	// its last database check).
	ReadHeaderTimeout, ReadTimeout, IdleTimeout, WriteTimeout time.Duration
	// MaxConns caps open connections (Start); 0 = the open-file limit
	// less the pool's connections and a reserve of 64.
	MaxConns int
	// LongPollMax caps a pop's wait timeout; 0 = DefaultLongPollMax.
	LongPollMax time.Duration
	// AuthSecret, when set, requires an HS256 JWT on /api routes.
	AuthSecret []byte
	// TenantHeader names a request header carrying the tenant when auth
	// is off (with auth, the token's "tenant" claim decides). Empty: the
	// default tenant.
	TenantHeader string
	// Candidates answers wildcard pops; nil = the hot-list when HotList is
	// set, else broker.SQLScan{} (the SQL candidate scan).
	Candidates broker.CandidateSource
	// HotList answers wildcard pops from the in-memory hot-list
	// (docs/design/hotlist.md) with HotListOptions (zero values: defaults; the
	// Logger defaults to the server's). With Peers, brokers exchange
	// dirty hints on their own NOTIFY channel.
	HotList        bool
	HotListOptions hotlist.Options
	// NoAutoTick is kept for compatibility and changes nothing: the broker
	// no longer ticks after a push (a consumer group's claim closes its
	// range at its own snapshot; classic consumers see a push at the
	// scheduled ticker's next tick).
	NoAutoTick bool
	// PushConcurrency is how many pgque.push calls the broker runs at
	// once; pushes arriving while they run are combined into the next
	// call (broker.Combiner). 0 = broker.DefaultPushConcurrency.
	PushConcurrency int
	// AckConcurrency is how many ack transactions the broker runs at once;
	// acks arriving while they run are combined into the next one
	// (broker.AckCombiner). 0 = broker.DefaultAckConcurrency.
	AckConcurrency int
	// DefaultSubscriptionMode is where a consumer group whose first pop
	// names no subscriptionMode starts (Queen's DEFAULT_SUBSCRIPTION_MODE):
	// "" or "all" from the oldest retained message, "new" (or "new-only")
	// from the latest message on. Other values make New fail.
	DefaultSubscriptionMode string
	Logger                  *slog.Logger
}

// Server is the broker service: New, then Start / Stop (or Handler for an
// httptest server plus StartBackground / Stop).
type Server struct {
	cfg     Config
	log     *slog.Logger
	pool    *pgxpool.Pool
	gates   *wake.Gates
	cands   broker.CandidateSource
	hot     *hotlistpg.Source // nil: hot-list off
	pusher  *broker.Combiner
	acker   *broker.AckCombiner
	metrics *metrics
	origin  string
	started time.Time
	bodies  *budget
	handler http.Handler
	defMode string // the engine's mode for requests naming none ("all" / "new")

	mu       sync.Mutex
	srv      *http.Server
	ln       net.Listener
	bgCancel context.CancelFunc
	bgDone   chan struct{}
	// stopping is closed by Stop: parked pops return at once.
	stopping chan struct{}
	peers    *peerListener
	// maint is the maintenance switches as this broker knows them
	// (maintenance.go).
	maint maintState
}

// New validates cfg and builds a server that does not run yet.
func New(cfg Config) (*Server, error) {
	if cfg.Pool == nil {
		return nil, errors.New("httpapi: no connection pool")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = DefaultBodyLimit
	}
	if cfg.LongPollMax <= 0 {
		cfg.LongPollMax = DefaultLongPollMax
	}
	if cfg.BodyBudget <= 0 {
		cfg.BodyBudget = max(DefaultBodyBudget, bodyCost(cfg.BodyLimit))
	}
	if cfg.BodyBudget < bodyCost(cfg.BodyLimit) {
		return nil, fmt.Errorf("httpapi: the body budget (%d bytes) must hold one body of the largest size (4 × the body limit, %d bytes)", cfg.BodyBudget, bodyCost(cfg.BodyLimit))
	}
	if cfg.PushMaxItems <= 0 {
		cfg.PushMaxItems = DefaultPushMaxItems
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = cfg.LongPollMax + dbTimeout + 5*time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	defMode, err := defaultMode(cfg.DefaultSubscriptionMode)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "broker"), pool: cfg.Pool, gates: wake.New(),
		cands: cfg.Candidates, origin: hex.EncodeToString(id[:]), started: time.Now(), stopping: make(chan struct{}),
		bodies: &budget{cap: cfg.BodyBudget}, defMode: defMode}
	if s.cands == nil && cfg.HotList {
		o := cfg.HotListOptions
		if o.Logger == nil {
			o.Logger = s.log
		}
		hc := hotlistpg.Config{DB: cfg.Pool, Options: o, Names: hotlistpg.Names{Key: gateKey, Stored: storedOfKey}}
		if cfg.Peers {
			hc.Peers = hotlistpg.NewTransport(cfg.Pool, s.origin, 0, s.log)
		}
		s.hot = hotlistpg.New(hc)
		s.cands = s.hot
	}
	if s.cands == nil {
		s.cands = broker.SQLScan{}
	}
	s.pusher = broker.NewCombiner(cfg.Pool, cfg.PushConcurrency, 0, dbTimeout)
	s.acker = broker.NewAckCombiner(cfg.Pool, cfg.AckConcurrency, 0, dbTimeout)
	s.pusher.SetNotify(s.pushNotify())
	s.metrics = newMetrics(s)
	s.initMaintenance()
	s.handler = s.routes()
	return s, nil
}

// Handler is the HTTP handler (every route, middleware included).
func (s *Server) Handler() http.Handler { return s.handler }

// wakeLocal opens the gates of a queue (its stored name) and of the label
// pops of its tenant after its events became claimable (a commit).
func (s *Server) wakeLocal(stored string) {
	tenant, _ := splitStored(stored)
	s.gates.Signal(gateKey(stored))
	s.gates.Signal(queuekey.Make(tenant, ""))
}

// StartBackground starts the services that run beside the HTTP listener
// (the peer listener, the hot-list's loops). Start calls it; tests serving Handler through
// httptest call it themselves. It returns once LISTEN is in effect (or ctx
// ends).
func (s *Server) StartBackground(ctx context.Context) error {
	s.mu.Lock()
	if s.bgDone != nil {
		s.mu.Unlock()
		return errors.New("httpapi: already started")
	}
	bg, cancel := context.WithCancel(context.Background())
	s.bgCancel, s.bgDone = cancel, make(chan struct{})
	var ready chan struct{}
	if s.hot != nil {
		s.hot.Start(bg)
	}
	if s.cfg.Peers {
		ready = make(chan struct{})
		s.peers = &peerListener{conn: s.cfg.Conn, log: s.log, origin: s.origin, ready: ready,
			onHint: func(queue string) {
				s.metrics.peerHints.Inc()
				s.cands.Note(broker.Event{Kind: broker.EventPushed, Queue: queue})
				s.wakeLocal(queue)
			},
			onMaintenance: s.refreshMaintenance}
		if s.hot != nil && s.hot.Peers() != nil {
			tr := s.hot.Peers()
			s.peers.hotlist = tr.Receive
			s.peers.onListen = tr.Listening
		}
		go func() { defer close(s.bgDone); s.peers.run(bg) }()
	} else {
		close(s.bgDone)
	}
	s.mu.Unlock()
	if ready != nil {
		select {
		case <-ready:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the peer wake listener: %w", ctx.Err())
		}
	}
	return nil
}

// Start listens on cfg.Listen and serves until Stop. It returns once the
// listener is open (its address: Addr).
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (choose another --listen address or stop what uses it)", s.cfg.Listen, err)
	}
	if err := s.StartBackground(ctx); err != nil {
		ln.Close()
		return err
	}
	maxConns := s.cfg.MaxConns
	if maxConns <= 0 {
		maxConns = autoMaxConns(int(s.pool.Config().MaxConns))
	}
	ln = newConnLimiter(ln, maxConns, s.log)
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout: s.cfg.ReadTimeout, WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout,
		ConnState: connState, ConnContext: connContext,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP server stopped", "err", err)
		}
	}()
	s.log.Info("broker listening", "addr", ln.Addr().String(), "max_connections", maxConns)
	return nil
}

// Addr is the listening address after Start ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Stop drains: it stops accepting connections, ends parked pops (they
// answer 204), lets requests in flight finish until ctx ends, then stops
// the hot-list and the peer listener. The pool stays open (the caller
// closes it).
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	select {
	case <-s.stopping:
	default:
		close(s.stopping)
	}
	cancel, done := s.bgCancel, s.bgDone
	s.mu.Unlock()
	var errs []error
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("draining HTTP requests: %w", err))
			_ = srv.Close()
		}
	}
	if s.hot != nil {
		if err := s.hot.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the hot-list: %w", err))
		}
	}
	if cancel != nil {
		cancel()
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("stopping the peer listener: %w", ctx.Err()))
		}
	}
	return errors.Join(errs...)
}
