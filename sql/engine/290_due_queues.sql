-- pgque.due_queues(i_queue_id): the queues a tick is due for now (all queues
-- when i_queue_id is NULL), with their latest tick id and the event
-- sequence's position as read now (event_seq: the tick records it, see
-- tick_queue for why it is read before pg_locks). One set-based query:
-- the event sequence is read with pg_sequence_last_value (no write) and the
-- latest tick by index, so checking idle queues costs no WAL.
--
-- The property the rules keep (docs/design/engine.md, "Visibility and re-ticks"):
-- every committed event is in some batch within one tick period (classic
-- thresholds: ticker_max_lag) of its commit, whatever else runs in the
-- cluster - and a queue with nothing new is not ticked before its idle
-- period, however often ticker() runs and however old the xmin horizon is.
-- "Something new" since the last tick L is one of:
--  * new event ids: the sequence moved past L's tick_event_seq (producers,
--    and maint_retry_events, which advances it for the rows it moves back);
--  * a producer L recorded as in flight (tick_wait, see tick_queue) has
--    committed: its events may have been counted by L (or earlier) without
--    being visible in L's snapshot, and only a new tick carries them. A
--    transaction that is not a producer of this queue never enters
--    tick_wait, so long transactions elsewhere cost nothing;
--  * L was recorded with tick_wait_probe (a producer without an xid yet)
--    and has_events_since(L's snapshot) finds a committed row L did not
--    see (an index probe, only for such ticks; no write).
-- Rules:
--  * forced, or only the creation tick exists -> due;
--  * the last tick is ticker_idle_period old -> due;
--  * with a tick period (queue's, else the installation's) and a classic
--    consumer (a pgque.subscription row: subscribe/receive/ack; they read
--    batches between ticks): something new and the last tick lies in an
--    earlier period slot (epoch-aligned);
--  * with a tick period and no classic consumer (consumer groups only, or
--    nobody): the classic thresholds below for new ids and waited-for
--    producers (no back-off), and never twice in one period slot. Consumer
--    groups need no ticks (a claim closes its range at its own snapshot),
--    so such a queue is not ticked at the fast rate: its ticks are the
--    slow ones that keep get_queue_info's ticker lag and ev_new bounded
--    (ticker_max_lag, ticker_max_count) and its tick history (group_expire)
--    going. A consumer that subscribes makes the next check use the period
--    again (the subscription is read on every check);
--  * classic (no period): new ids -> due at ticker_max_count of them or at
--    ticker_max_lag; a waited-for producer committed -> due at
--    ticker_max_lag; nothing new -> due when the lag is >= max_lag/2 and
--    >= twice the previous gap (PgQ's back-off).
-- Paused queues and queues with an external ticker are never due.
-- Locks: RowExclusiveLock on the event sequences (pg_sequence_last_value
-- takes it; no conflict with producers); AccessShareLock on the
-- subscription children; has_events_since's reads.
-- Called by: ticker(), ticker(queue).
-- quiet: the queue's latest tick L waited for nobody (no tick_wait, no
-- tick_wait_probe) and the event sequence has not moved since L: no
-- producer of the queue can be in flight (every id <= L's tick_event_seq
-- was allocated by a transaction that L saw committed or recorded), so a
-- tick of it needs no pg_locks read (tick_in_flight): its producers in
-- flight are none. Its due ticks are the idle-period and forced ones.
-- Upgrade: the result gained event_seq, then quiet (a changed result needs
-- a DROP).
DO $upgrade$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                WHERE p.oid = pg_catalog.to_regprocedure('pgque.due_queues(integer)')
                  AND NOT 'quiet' = ANY (p.proargnames)) THEN
        DROP FUNCTION pgque.due_queues(int);
    END IF;
END $upgrade$;
CREATE OR REPLACE FUNCTION pgque.due_queues(i_queue_id int DEFAULT NULL)
RETURNS TABLE (queue_id int, queue_name text, last_tick_id bigint, event_seq bigint, quiet boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_now pg_snapshot := pgque.tick_snapshot();
BEGIN
    RETURN QUERY
    WITH cfg AS (
        SELECT (SELECT value::int FROM pgque.settings WHERE name = 'tick_period_ms') AS default_period
    ), q AS (
        SELECT q.*, coalesce(q.queue_tick_period_ms, cfg.default_period) AS period_ms,
               coalesce(pg_sequence_last_value(q.queue_event_seq), 0) AS cur_seq,
               l.tick_id AS last_id, l.tick_time AS last_time, l.tick_event_seq AS last_seq,
               l.tick_snapshot AS last_snap, l.tick_wait AS last_wait, l.tick_wait_probe AS last_probe
          FROM pgque.queue q
         CROSS JOIN cfg
          LEFT JOIN LATERAL (
                SELECT t.tick_id, t.tick_time, t.tick_event_seq, t.tick_snapshot, t.tick_wait, t.tick_wait_probe
                  FROM pgque.tick t
                 WHERE t.tick_queue = q.queue_id
                 ORDER BY t.tick_id DESC
                 LIMIT 1) l ON true
         WHERE (i_queue_id IS NULL OR q.queue_id = i_queue_id)
           AND NOT q.queue_external_ticker
           AND NOT q.queue_ticker_paused
    ), r AS (
        SELECT q.*,
               q.cur_seq > q.last_seq AS new_ids,
               -- "left behind": a waited-for producer committed, or a probe finds rows
               CASE WHEN q.last_wait IS NOT NULL
                         AND EXISTS (SELECT 1 FROM unnest(q.last_wait) x
                                      -- ended (so below xmax: pg_xact_status
                                      -- raises for an xid in the future) and committed
                                      WHERE CASE WHEN pg_visible_in_snapshot(x, v_now)
                                                 THEN coalesce(pg_xact_status(x), 'committed') = 'committed'
                                                 ELSE false END)
                    THEN true
                    ELSE false
               END AS waited
          FROM q
    )
    SELECT r.queue_id, r.queue_name, r.last_id, r.cur_seq,
           coalesce(r.last_id IS NOT NULL AND r.cur_seq <= r.last_seq
                    AND r.last_wait IS NULL AND NOT r.last_probe, false)
      FROM r
     WHERE CASE
             WHEN r.last_id IS NULL OR r.queue_force_tick OR r.last_id <= 1 THEN true
             WHEN now() - r.last_time >= r.queue_ticker_idle_period THEN true
             WHEN r.period_ms IS NOT NULL THEN
                  CASE WHEN floor(extract(epoch FROM now()) * 1000 / r.period_ms)
                            <= floor(extract(epoch FROM r.last_time) * 1000 / r.period_ms) THEN false
                       WHEN NOT (r.new_ids OR r.waited OR r.last_probe) THEN false
                       -- no classic consumer: the classic thresholds (the
                       -- subscriptions are read only here: something new,
                       -- in a later slot)
                       WHEN NOT EXISTS (SELECT 1 FROM pgque.subscription s WHERE s.sub_queue = r.queue_id) THEN
                            CASE WHEN r.new_ids THEN
                                      r.cur_seq - r.last_seq >= r.queue_ticker_max_count
                                   OR now() - r.last_time >= r.queue_ticker_max_lag
                                 WHEN now() - r.last_time >= r.queue_ticker_max_lag THEN
                                      r.waited OR (r.last_probe AND pgque.has_events_since(r.queue_id, r.last_snap))
                                 ELSE false
                            END
                       WHEN r.new_ids OR r.waited THEN true
                       WHEN r.last_probe THEN pgque.has_events_since(r.queue_id, r.last_snap)
                       ELSE false
                  END
             WHEN r.new_ids THEN
                  r.cur_seq - r.last_seq >= r.queue_ticker_max_count
               OR now() - r.last_time >= r.queue_ticker_max_lag
             WHEN now() - r.last_time >= r.queue_ticker_max_lag
                  AND (r.waited OR (r.last_probe AND pgque.has_events_since(r.queue_id, r.last_snap))) THEN true
             ELSE
                  now() - r.last_time >= r.queue_ticker_max_lag / 2
              AND now() - r.last_time >= 2 * (r.last_time - (
                      SELECT p.tick_time FROM pgque.tick p
                       WHERE p.tick_queue = r.queue_id AND p.tick_id < r.last_id
                       ORDER BY p.tick_id DESC LIMIT 1))
           END;
END;
$$;
