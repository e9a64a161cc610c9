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
a reseed scan every --hotlist-reseed-interval catches whatever it missed.
--hotlist=false asks PostgreSQL for candidates on every pop (the SQL scan).
How it works and its log line: docs/design/hotlist.md; its tunables:
docs/reference/hotlist-config.md.

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

Ticking: besides the broker-driven tick after each push, serve runs the
ticker daemon as a standby (--standby-ticker, default true): while the
pg_cron ticker_loop (or a "pgquectl tick --run" daemon) is alive it only
watches that loop's lock; when the loop is gone (backend killed, PostgreSQL
restarted, pg_cron absent) it starts ticking within about a second, and hands
back when the loop returns. So events committed by producers outside the
broker, or by a broker that died before its tick, become poppable without
pg_cron. Several brokers elect one ticking standby among themselves.

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
	f.String("listen", httpapi.DefaultListen, "host:port to listen on")
	f.String("auth-secret", "", "HS256 secret: require a JWT bearer token on /api routes (env PGQUE_AUTH_SECRET; default: auth off)")
	f.String("tenant-header", "", "with auth off: the request header naming the tenant (default: one tenant)")
	f.Int64("body-limit", httpapi.DefaultBodyLimit, "largest request body in bytes (413 above)")
	f.Int64("body-budget", httpapi.DefaultBodyBudget, "request bodies in flight at once, in bytes, each counted 4 times its size (body and decoded copies); past it 503 with Retry-After (at least 4 × --body-limit)")
	f.Int("push-max-items", httpapi.DefaultPushMaxItems, "most items in one push (or in the pushes of one transaction); 413 above")
	f.Duration("read-header-timeout", httpapi.DefaultReadHeaderTimeout, "time a client has to send a request's headers")
	f.Duration("read-timeout", httpapi.DefaultReadTimeout, "time a client has to send a whole request, body included (a slow body is cut)")
	f.Duration("idle-timeout", httpapi.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	f.Duration("write-timeout", 0, "time to answer a request once read (default: --long-poll-max + 35s, so a parked pop can answer)")
	f.Int("max-connections", 0, "open client connections at most; at the cap a new one evicts the longest-waiting connection that is not being served, else gets 503 (default: the open-file limit less --pool-size and 64)")
	f.Int32("pool-size", 20, "database connections at most (a waiting pop holds none)")
	f.Duration("long-poll-max", httpapi.DefaultLongPollMax, "cap on a pop's wait timeout")
	f.Duration("drain-timeout", httpapi.DefaultDrain, "on SIGTERM, how long requests in flight may take to finish")
	f.String("default-subscription-mode", "", "where a consumer group whose first pop names no subscriptionMode starts: all (or empty) from the oldest retained message, new (or new-only) from the latest message on (env PGQUE_DEFAULT_SUBSCRIPTION_MODE)")
	f.Bool("no-peers", false, "do not LISTEN for other brokers' pushes (one broker per database)")
	f.Int("push-concurrency", broker.DefaultPushConcurrency, "pgque.push calls run at once; pushes arriving meanwhile go out together in the next call (one commit); default: the number of CPUs, between 2 and 4 (more calls than cores combine fewer pushes for more CPU)")
	f.Int("ack-concurrency", broker.DefaultAckConcurrency, "ack transactions run at once; acks arriving meanwhile go out together in the next one (one pgque.group_ack per tenant and consumer group, one commit); default: the number of CPUs, between 2 and 4")
	f.Bool("no-auto-tick", false, "no effect, kept for compatibility: the broker no longer ticks after a push (consumer groups need no tick; classic consumers are ticked by pg_cron, the ticker daemon or the standby ticker)")
	f.Bool("standby-ticker", true, "run the ticker daemon in standby: tick (every --standby-tick-period) only while no pg_cron ticker_loop and no other daemon ticks; needs pgque_admin")
	f.Duration("standby-tick-period", 10*time.Millisecond, "how often the standby ticker calls pgque.ticker() once it ticks (queues still tick at their own tick_period_ms)")
	f.String("pprof", "", "serve Go's profiler (/debug/pprof/) on this host:port, e.g. 127.0.0.1:6060 (default: off; for diagnosis only)")
	addHotlistFlags(f)
	return cmd
}

func runServe(cmd *cobra.Command, a *app) error {
	if a.v.GetInt32("pool-size") < 2 {
		return usagef("--pool-size must be at least 2")
	}
	if n := a.v.GetInt("push-concurrency"); n < 1 || n > 1000 {
		return usagef("--push-concurrency must be between 1 and 1000 (got %d)", n)
	}
	if n := a.v.GetInt("ack-concurrency"); n < 1 || n > 1000 {
		return usagef("--ack-concurrency must be between 1 and 1000 (got %d)", n)
	}
	if a.v.GetInt64("body-limit") < 1024 {
		return usagef("--body-limit must be at least 1024 bytes")
	}
	if b := a.v.GetInt64("body-budget"); b < 4*a.v.GetInt64("body-limit") {
		return usagef("--body-budget must be at least 4 × --body-limit (%d bytes; got %d)", 4*a.v.GetInt64("body-limit"), b)
	}
	if n := a.v.GetInt("push-max-items"); n < 1 {
		return usagef("--push-max-items must be at least 1")
	}
	for _, name := range []string{"read-header-timeout", "read-timeout", "idle-timeout"} {
		if a.durationFlag(name) <= 0 {
			return usagef("--%s must be positive", name)
		}
	}
	if a.durationFlag("write-timeout") < 0 || a.v.GetInt("max-connections") < 0 {
		return usagef("--write-timeout and --max-connections must not be negative")
	}
	if p := a.durationFlag("standby-tick-period"); p < time.Millisecond || p > time.Minute {
		return usagef("--standby-tick-period must be between 1ms and 1m (got %s)", p)
	}
	if err := httpapi.CheckDefaultSubscriptionMode(a.v.GetString("default-subscription-mode")); err != nil {
		return usagef("--default-subscription-mode: %v", err)
	}
	hot, err := hotlistOptions(a)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if addr := a.v.GetString("pprof"); addr != "" {
		if err := startPprof(ctx, addr, a.log); err != nil {
			return err
		}
	}
	conn := a.conn()
	conn.ApplicationName = "pgquectl serve"
	pconn := conn
	pconn.DSN = withPoolSize(conn.DSN, a.v.GetInt32("pool-size"))
	pool, err := db.NewPool(ctx, pconn)
	if err != nil {
		return err
	}
	defer pool.Close()
	srv, err := httpapi.New(httpapi.Config{
		Pool: pool, Conn: conn, Peers: !a.v.GetBool("no-peers"), Listen: a.v.GetString("listen"),
		BodyLimit: a.v.GetInt64("body-limit"), LongPollMax: a.durationFlag("long-poll-max"),
		BodyBudget: a.v.GetInt64("body-budget"), PushMaxItems: a.v.GetInt("push-max-items"),
		ReadHeaderTimeout: a.durationFlag("read-header-timeout"), ReadTimeout: a.durationFlag("read-timeout"),
		IdleTimeout: a.durationFlag("idle-timeout"), WriteTimeout: a.durationFlag("write-timeout"),
		MaxConns:   a.v.GetInt("max-connections"),
		AuthSecret: []byte(a.v.GetString("auth-secret")), TenantHeader: a.v.GetString("tenant-header"),
		NoAutoTick: a.v.GetBool("no-auto-tick"), PushConcurrency: a.v.GetInt("push-concurrency"),
		AckConcurrency: a.v.GetInt("ack-concurrency"), Logger: a.log,
		HotList: a.v.GetBool("hotlist"), HotListOptions: hot,
		DefaultSubscriptionMode: a.v.GetString("default-subscription-mode"),
	})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Broker listening on http://%s (Ctrl-C to stop)\n", srv.Addr())
	tickDone := make(chan struct{})
	if a.v.GetBool("standby-ticker") {
		if err := startStandbyTicker(ctx, a, conn, tickDone); err != nil {
			_ = srv.Stop(context.WithoutCancel(ctx))
			return err
		}
	} else {
		close(tickDone)
	}
	<-ctx.Done()
	<-tickDone
	a.log.Info("draining", "timeout", a.durationFlag("drain-timeout"))
	dctx, cancel := context.WithTimeout(context.Background(), a.durationFlag("drain-timeout")+5*time.Second)
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
	period := a.durationFlag("standby-tick-period")
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
