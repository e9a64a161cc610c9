-- pgque.ticker_idle_until(): until when a ticker round may be skipped
-- (ticker_idle) as long as nothing is committed: the earliest time at which
-- a queue becomes due by time alone, or a retry event's time comes; NULL
-- when that cannot be said - some queue that ticks (not paused, no
-- external ticker) is not quiet: it has new event ids since its latest
-- tick, a committed producer that tick waited for, rows a probe of it
-- finds (due_queues' "something new", the same expressions), only its
-- creation tick, or is forced. 'infinity' with no queue and no retry.
-- A tick that waited for producers still in flight (or probed and finds
-- nothing yet) counts as quiet: only a commit can change that, and a
-- commit ends the idle state (ticker_idle).
-- A quiet queue is due (due_queues' rules, the same comparisons with
-- now()) only:
--  * when its last tick is ticker_idle_period old: last tick time + that
--    period;
--  * classic thresholds (no tick period): by PgQ's back-off, when the lag
--    is >= ticker_max_lag / 2 and >= twice the previous gap: last tick
--    time + the larger of the two (never without a previous tick).
-- With a tick period, something new is needed too. Anything else that
-- changes the answer - a queue forced, paused, reconfigured, created or
-- dropped, an event committed, tick_period_ms changed, a retry added -
-- commits a write, which ticker_idle sees.
-- Locks: RowExclusiveLock on the event sequences (pg_sequence_last_value);
-- has_events_since's reads. Writes: nothing. Called by: ticker_plan (no
-- grant: SECURITY DEFINER callers only).
CREATE OR REPLACE FUNCTION pgque.ticker_idle_until()
RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT CASE WHEN count(*) = 0 OR bool_and(s.quiet)
                THEN least(coalesce(min(s.due_at), 'infinity'),
                           (SELECT min(r.ev_retry_after) FROM pgque.retry_queue r))
           END
      FROM (SELECT coalesce(l.tick_id > 1 AND NOT q.queue_force_tick
                            AND coalesce(pg_sequence_last_value(q.queue_event_seq), 0) <= l.tick_event_seq
                            -- a waited-for producer committed (due_queues' waited)
                            AND NOT (l.tick_wait IS NOT NULL
                                     AND EXISTS (SELECT 1 FROM unnest(l.tick_wait) x
                                                  WHERE CASE WHEN pg_visible_in_snapshot(x, pgque.tick_snapshot())
                                                             THEN coalesce(pg_xact_status(x), 'committed') = 'committed'
                                                             ELSE false END))
                            -- a probe finds rows the last tick did not see
                            AND NOT (l.tick_wait_probe AND pgque.has_events_since(q.queue_id, l.tick_snapshot)), false) AS quiet,
                   least(l.tick_time + q.queue_ticker_idle_period,
                         CASE WHEN coalesce(q.queue_tick_period_ms, cfg.default_period) IS NULL
                                   AND pv.tick_time IS NOT NULL
                              THEN l.tick_time + greatest(q.queue_ticker_max_lag / 2, 2 * (l.tick_time - pv.tick_time))
                         END) AS due_at
              FROM pgque.queue q
             CROSS JOIN (SELECT (SELECT st.value::int FROM pgque.settings st
                                  WHERE st.name = 'tick_period_ms') AS default_period) cfg
              LEFT JOIN LATERAL (
                    SELECT t.tick_id, t.tick_time, t.tick_event_seq, t.tick_snapshot, t.tick_wait, t.tick_wait_probe
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
