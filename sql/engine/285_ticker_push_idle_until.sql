-- pgque.ticker_push_idle_until(): until when ticker rounds may be skipped
-- while events keep being committed (ticker_idle's second state, for push
-- loads: the cluster's snapshot moves every round). Only when no classic
-- consumer exists (no pgque.subscription row, any queue): consumer groups
-- need no ticks (a claim closes its range at its own snapshot), so every
-- tick left is a slow one, due by time:
--  * the idle period: last tick time + ticker_idle_period;
--  * new events: ticker_max_lag after the last tick - or, when that lies
--    in the past (the queue had nothing new at the due check, or it would
--    have been due), ticker_max_lag from now: an event committed later is
--    ticked within ticker_max_lag of its commit, as a due check every
--    round would tick it (at most one round sooner);
--  * classic thresholds (no tick period) with nothing new: PgQ's back-off
--    (last tick time + the larger of ticker_max_lag / 2 and twice the
--    previous gap), when still ahead;
--  * the first retry's time.
-- ticker_max_count is not a reason to end it: under a push load a queue
-- without classic consumers is ticked every ticker_max_lag (the check at
-- that time still applies it), so get_queue_info's ticker lag stays within
-- ticker_max_lag and its ev_new within ticker_max_lag's worth of events.
-- NULL: a classic consumer exists, or some queue that ticks is forced or
-- has only its creation tick (due at once). 'infinity' with no queue and
-- no retry. Whatever else could make a queue due commits a ticker_wake row
-- (a subscribe, a queue or setting change), which ends the state.
-- Locks: AccessShareLock on the subscription, tick, queue and retry
-- tables. Writes: nothing. Called by: ticker_plan (no grant: SECURITY
-- DEFINER callers only).
CREATE OR REPLACE FUNCTION pgque.ticker_push_idle_until()
RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT CASE WHEN EXISTS (SELECT 1 FROM pgque.subscription) OR bool_or(s.due_at IS NULL) THEN NULL
                ELSE least(coalesce(min(s.due_at), 'infinity'),
                           (SELECT min(r.ev_retry_after) FROM pgque.retry_queue r))
           END
      FROM (SELECT CASE WHEN l.tick_id IS NULL OR l.tick_id <= 1 OR q.queue_force_tick THEN NULL
                        ELSE least(l.tick_time + q.queue_ticker_idle_period,
                                   CASE WHEN l.tick_time + q.queue_ticker_max_lag > now()
                                        THEN l.tick_time + q.queue_ticker_max_lag
                                        ELSE now() + q.queue_ticker_max_lag
                                   END,
                                   CASE WHEN coalesce(q.queue_tick_period_ms, cfg.default_period) IS NULL
                                             AND pv.tick_time IS NOT NULL
                                             AND l.tick_time + greatest(q.queue_ticker_max_lag / 2, 2 * (l.tick_time - pv.tick_time)) > now()
                                        THEN l.tick_time + greatest(q.queue_ticker_max_lag / 2, 2 * (l.tick_time - pv.tick_time))
                                   END)
                   END AS due_at
              FROM pgque.queue q
             CROSS JOIN (SELECT (SELECT st.value::int FROM pgque.settings st
                                  WHERE st.name = 'tick_period_ms') AS default_period) cfg
              LEFT JOIN LATERAL (
                    SELECT t.tick_id, t.tick_time
                      FROM pgque.tick t
                     WHERE t.tick_queue = q.queue_id
                     ORDER BY t.tick_id DESC
                     LIMIT 1) l ON true
              LEFT JOIN LATERAL (
                    SELECT p.tick_time
                      FROM pgque.tick p
                     WHERE p.tick_queue = q.queue_id AND p.tick_id < l.tick_id
                     ORDER BY p.tick_id DESC
                     LIMIT 1) pv ON true
             WHERE NOT q.queue_external_ticker
               AND NOT q.queue_ticker_paused) s;
$$;
