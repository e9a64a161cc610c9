package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/httpapi"
	"github.com/pgquectl/pgquectl/internal/ticker"
)

func init() { commands = append(commands, newServeCmd) }

func newServeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [--listen host:port]",
		Short: "Run the HTTP broker (Queen v1 API: partitions, consumer groups, long-poll)",
		Long: `serve runs the HTTP broker. It speaks the v1 API of the Queen message queue,
so Queen's client libraries work against it unchanged: push to (queue,
partition), pop with leases per partition (per-key order), ack, consumer
groups (fan-out), dead letters, transactions. Routes, options, auth and
metrics: docs/reference/http.md.

Every request is one database call; a long-poll pop (wait=true) holds no
database connection while it waits. After a push commits, the broker ticks
that queue itself, so pushed messages are poppable at once (no pg_cron
needed for broker traffic). Brokers on one database wake each other's waiting
pops through LISTEN/NOTIFY: run as many as you like behind a load balancer.

Wildcard pops (GET /api/v1/pop/queue/:queue) are answered from the
in-memory hot-list (--hotlist, default true): PostgreSQL is asked only about
the partitions it believes hot, so an idle partition costs nothing per pop;
a periodic reseed scan catches whatever it missed. --hotlist=false asks
PostgreSQL for candidates on every pop (the SQL scan). The hot-list's
tunables are config-file keys (hotlist-…, or PGQUE_HOTLIST_… in the
environment), not flags: docs/reference/hotlist-config.md lists them with
their defaults; how it works and its log line: docs/design/hotlist.md.

Consumer groups start where Queen's do: a group whose first pop names no
subscriptionMode reads every retained message; subscriptionMode=new (or
new-only) starts at the latest message, any other value reads everything.
--default-subscription-mode new (env PGQUE_DEFAULT_SUBSCRIPTION_MODE, like
Queen's DEFAULT_SUBSCRIPTION_MODE) makes groups that name no mode start at
the latest message instead.

Auth is off by default. With --auth-secret (or PGQUE_AUTH_SECRET) every /api
route needs "Authorization: Bearer <JWT>" signed HS256 with that secret; the
claim "role" (or "roles") is read-only, write-only, read-write or admin, and
"tenant" scopes queue names. /health, /status and /metrics/prometheus stay
open.

Ticking: consumer groups need no ticks (a pop closes its range at its own
snapshot, so a committed push is poppable at once); classic PgQ-style
consumers read batches between ticks. serve runs the ticker daemon as a
standby for them (--standby-ticker, default true): while the
pg_cron ticker_loop (or a "pgquectl tick --run" daemon) is alive it only
watches that loop's lock; when the loop is gone (backend killed, PostgreSQL
restarted, pg_cron absent) it starts ticking within about a second, and hands
back when the loop returns, so classic consumers keep getting batches
without pg_cron. Several brokers elect one ticking standby among themselves.

Limits: requests are read within --read-header-timeout / --read-timeout
(a slow body is cut), bodies in flight share --body-budget (503 with
Retry-After past it), a push holds at most --push-max-items items (413),
and open connections stay below the open-file limit (--max-connections):
docs/reference/http.md ("Limits").

SIGTERM / Ctrl-C drains: no new connections, waiting pops answer 204,
requests in flight finish (up to --drain-timeout), then the pool closes.`,
		Example: `  # next to pgquectl dev (its DSN), on the default port 6632
  pgquectl serve --dsn postgres://localhost:5432/postgres

  # push and pop with curl
  curl -s localhost:6632/api/v1/push -d '{"items":[{"queue":"orders","partition":"customer-7","payload":{"id":1}}]}'
  curl -s 'localhost:6632/api/v1/pop/queue/orders?wait=true&timeout=5000'

  # another port, a bigger pool, JWT auth, 5 s long-poll cap
  pgquectl serve --listen 127.0.0.1:8080 --pool-size 40 --auth-secret "$SECRET" --long-poll-max 5s

  # Prometheus
  curl -s localhost:6632/metrics/prometheus | grep pgque_`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, a) },
	}
	f := cmd.Flags()
	addFlag(f, keyListen)
	addFlag(f, keyAuthSecret)
	addFlag(f, keyTenantHeader)
	addFlag(f, keyBodyLimit)
	addFlag(f, keyBodyBudget)
	addFlag(f, keyPushMaxItems)
	addFlag(f, keyReadHeaderTimeout)
	addFlag(f, keyReadTimeout)
	addFlag(f, keyIdleTimeout)
	addFlag(f, keyWriteTimeout)
	addFlag(f, keyMaxConnections)
	addFlag(f, keyPoolSize)
	addFlag(f, keyLongPollMax)
	addFlag(f, keyDrainTimeout)
	addFlag(f, keyDefaultSubscriptionMode)
	addFlag(f, keyNoPeers)
	addFlag(f, keyPushConcurrency)
	addFlag(f, keyAckConcurrency)
	addFlag(f, keyNoAutoTick)
	_ = f.MarkHidden(keyNoAutoTick.Name) // no effect: kept so old scripts still run
	addFlag(f, keyStandbyTicker)
	addFlag(f, keyStandbyTickPeriod)
	addFlag(f, keyPprof)
	addFlag(f, keyHotlist)
	addRemovedHotlistFlags(f)
	return cmd
}

// serve's settings: flags, also PGQUE_… in the environment and keys of the
// config file. The hot-list's tunables are config keys only
// (internal/config.Hotlist).
var (
	keyListen = config.Key[string]{Name: "listen", Default: httpapi.DefaultListen,
		Help: "host:port to listen on"}
	keyAuthSecret = config.Key[string]{Name: "auth-secret",
		Help: "HS256 secret: require a JWT bearer token on /api routes (env PGQUE_AUTH_SECRET; default: auth off)"}
	keyTenantHeader = config.Key[string]{Name: "tenant-header",
		Help: "with auth off: the request header naming the tenant (default: one tenant)"}
	keyBodyLimit = config.Key[int64]{Name: "body-limit", Default: httpapi.DefaultBodyLimit,
		Help: "largest request body in bytes (413 above)"}
	keyBodyBudget = config.Key[int64]{Name: "body-budget", Default: httpapi.DefaultBodyBudget,
		Help: "request bodies in flight at once, in bytes, each counted 4 times its size (body and decoded copies); past it 503 with Retry-After (at least 4 × --body-limit)"}
	keyPushMaxItems = config.Key[int]{Name: "push-max-items", Default: httpapi.DefaultPushMaxItems,
		Help: "most items in one push (or in the pushes of one transaction); 413 above"}
	keyReadHeaderTimeout = config.Key[time.Duration]{Name: "read-header-timeout", Default: httpapi.DefaultReadHeaderTimeout,
		Help: "time a client has to send a request's headers"}
	keyReadTimeout = config.Key[time.Duration]{Name: "read-timeout", Default: httpapi.DefaultReadTimeout,
		Help: "time a client has to send a whole request, body included (a slow body is cut)"}
	keyIdleTimeout = config.Key[time.Duration]{Name: "idle-timeout", Default: httpapi.DefaultIdleTimeout,
		Help: "how long an idle keep-alive connection stays open"}
	keyWriteTimeout = config.Key[time.Duration]{Name: "write-timeout",
		Help: "time to answer a request once read (default: --long-poll-max + 35s, so a parked pop can answer)"}
	keyMaxConnections = config.Key[int]{Name: "max-connections",
		Help: "open client connections at most; at the cap a new one evicts the longest-waiting connection that is not being served, else gets 503 (default: the open-file limit less --pool-size and 64)"}
	keyPoolSize = config.Key[int32]{Name: "pool-size", Default: 20,
		Help: "database connections at most (a waiting pop holds none)"}
	keyLongPollMax = config.Key[time.Duration]{Name: "long-poll-max", Default: httpapi.DefaultLongPollMax,
		Help: "cap on a pop's wait timeout"}
	keyDrainTimeout = config.Key[time.Duration]{Name: "drain-timeout", Default: httpapi.DefaultDrain,
		Help: "on SIGTERM, how long requests in flight may take to finish"}
	keyDefaultSubscriptionMode = config.Key[string]{Name: "default-subscription-mode",
		Help: "where a consumer group whose first pop names no subscriptionMode starts: all (or empty) from the oldest retained message, new (or new-only) from the latest message on (env PGQUE_DEFAULT_SUBSCRIPTION_MODE)"}
	keyNoPeers = config.Key[bool]{Name: "no-peers",
		Help: "do not LISTEN for other brokers' pushes (one broker per database)"}
	keyPushConcurrency = config.Key[int]{Name: "push-concurrency", Default: broker.DefaultPushConcurrency,
		Help: "pgque.push calls run at once; pushes arriving meanwhile go out together in the next call (one commit); default: the number of CPUs, between 2 and 4 (more calls than cores combine fewer pushes for more CPU)"}
	keyAckConcurrency = config.Key[int]{Name: "ack-concurrency", Default: broker.DefaultAckConcurrency,
		Help: "ack transactions run at once; acks arriving meanwhile go out together in the next one (one pgque.group_ack per tenant and consumer group, one commit); default: the number of CPUs, between 2 and 4"}
	keyNoAutoTick = config.Key[bool]{Name: "no-auto-tick",
		Help: "no effect, kept for compatibility: the broker no longer ticks after a push (consumer groups need no tick; classic consumers are ticked by pg_cron, the ticker daemon or the standby ticker)"}
	keyStandbyTicker = config.Key[bool]{Name: "standby-ticker", Default: true,
		Help: "run the ticker daemon in standby: tick (every --standby-tick-period) only while no pg_cron ticker_loop and no other daemon ticks; needs pgque_admin"}
	keyStandbyTickPeriod = config.Key[time.Duration]{Name: "standby-tick-period", Default: 10 * time.Millisecond,
		Help: "how often the standby ticker calls pgque.ticker() once it ticks (queues still tick at their own tick_period_ms)"}
	keyPprof = config.Key[string]{Name: "pprof",
		Help: "serve Go's profiler (/debug/pprof/) on this host:port, e.g. 127.0.0.1:6060 (default: off; for diagnosis only)"}
	keyHotlist = config.Key[bool]{Name: "hotlist", Default: true,
		Help: "answer wildcard pops from the in-memory hot-list; false: the SQL candidate scan on every pop (its tunables: config-file keys hotlist-*, docs/reference/hotlist-config.md)"}
)

func runServe(cmd *cobra.Command, a *app) error {
	if get(a, keyPoolSize) < 2 {
		return usagef("--pool-size must be at least 2")
	}
	if n := get(a, keyPushConcurrency); n < 1 || n > 1000 {
		return usagef("--push-concurrency must be between 1 and 1000 (got %d)", n)
	}
	if n := get(a, keyAckConcurrency); n < 1 || n > 1000 {
		return usagef("--ack-concurrency must be between 1 and 1000 (got %d)", n)
	}
	if get(a, keyBodyLimit) < 1024 {
		return usagef("--body-limit must be at least 1024 bytes")
	}
	if b := get(a, keyBodyBudget); b < 4*get(a, keyBodyLimit) {
		return usagef("--body-budget must be at least 4 × --body-limit (%d bytes; got %d)", 4*get(a, keyBodyLimit), b)
	}
	if n := get(a, keyPushMaxItems); n < 1 {
		return usagef("--push-max-items must be at least 1")
	}
	for _, k := range []config.Key[time.Duration]{keyReadHeaderTimeout, keyReadTimeout, keyIdleTimeout} {
		if get(a, k) <= 0 {
			return usagef("--%s must be positive", k.Name)
		}
	}
	if get(a, keyWriteTimeout) < 0 || get(a, keyMaxConnections) < 0 {
		return usagef("--write-timeout and --max-connections must not be negative")
	}
	if p := get(a, keyStandbyTickPeriod); p < time.Millisecond || p > time.Minute {
		return usagef("--standby-tick-period must be between 1ms and 1m (got %s)", p)
	}
	if err := httpapi.CheckDefaultSubscriptionMode(get(a, keyDefaultSubscriptionMode)); err != nil {
		return usagef("--default-subscription-mode: %v", err)
	}
	hot, err := hotlistOptions(cmd, a)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if addr := get(a, keyPprof); addr != "" {
		if err := startPprof(ctx, addr, a.log); err != nil {
			return err
		}
	}
	conn := a.conn()
	conn.ApplicationName = "pgquectl serve"
	pconn := conn
	pconn.DSN = withPoolSize(conn.DSN, get(a, keyPoolSize))
	pool, err := db.NewPool(ctx, pconn)
	if err != nil {
		return err
	}
	defer pool.Close()
	srv, err := httpapi.New(httpapi.Config{
		Pool: pool, Conn: conn, Peers: !get(a, keyNoPeers), Listen: get(a, keyListen),
		BodyLimit: get(a, keyBodyLimit), LongPollMax: get(a, keyLongPollMax),
		BodyBudget: get(a, keyBodyBudget), PushMaxItems: get(a, keyPushMaxItems),
		ReadHeaderTimeout: get(a, keyReadHeaderTimeout), ReadTimeout: get(a, keyReadTimeout),
		IdleTimeout: get(a, keyIdleTimeout), WriteTimeout: get(a, keyWriteTimeout),
		MaxConns:   get(a, keyMaxConnections),
		AuthSecret: []byte(get(a, keyAuthSecret)), TenantHeader: get(a, keyTenantHeader),
		NoAutoTick: get(a, keyNoAutoTick), PushConcurrency: get(a, keyPushConcurrency),
		AckConcurrency: get(a, keyAckConcurrency), Logger: a.log,
		HotList: get(a, keyHotlist), HotListOptions: hot,
		DefaultSubscriptionMode: get(a, keyDefaultSubscriptionMode),
	})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Broker listening on http://%s (Ctrl-C to stop)\n", srv.Addr())
	tickDone := make(chan struct{})
	if get(a, keyStandbyTicker) {
		if err := startStandbyTicker(ctx, a, conn, tickDone); err != nil {
			_ = srv.Stop(context.WithoutCancel(ctx))
			return err
		}
	} else {
		close(tickDone)
	}
	<-ctx.Done()
	<-tickDone
	a.log.Info("draining", "timeout", get(a, keyDrainTimeout))
	dctx, cancel := context.WithTimeout(context.Background(), get(a, keyDrainTimeout)+5*time.Second)
	defer cancel()
	if err := srv.Stop(dctx); err != nil {
		return fmt.Errorf("stopping the broker: %w", err)
	}
	return nil
}

// startStandbyTicker runs the ticker daemon beside the broker until ctx
// ends, then closes done. It ticks only while nobody else does (the pg_cron
// loop's lock, the daemons' leader lock); it never changes tick settings.
// A permanent error (the role may not tick) turns it off with a warning:
// the broker keeps serving, ticking stays with pg_cron / the pushes.
func startStandbyTicker(ctx context.Context, a *app, conn config.Connection, done chan struct{}) error {
	period := get(a, keyStandbyTickPeriod)
	conn.ApplicationName = "pgquectl serve ticker"
	cc, err := db.ParseConfig(conn)
	if err != nil {
		return err
	}
	d, err := ticker.New(ticker.Config{ConnConfig: cc, Period: period, Logger: a.log})
	if err != nil {
		return err
	}
	go func() {
		defer close(done)
		if err := d.Run(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("standby ticker off: the broker keeps serving; ticking is left to pg_cron, a ticker daemon and broker pushes (grant pgque_admin to tick from here, or pass --standby-ticker=false to silence this)", "err", err)
		}
	}()
	return nil
}

// withPoolSize sets pgxpool's pool_max_conns in dsn (URL or keyword form)
// unless the DSN sets it already.
func withPoolSize(dsn string, n int32) string {
	if strings.Contains(dsn, "pool_max_conns") {
		return dsn
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return fmt.Sprintf("%s%spool_max_conns=%d", dsn, sep, n)
	}
	return strings.TrimSpace(fmt.Sprintf("%s pool_max_conns=%d", dsn, n))
}
