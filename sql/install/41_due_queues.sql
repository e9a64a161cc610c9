-- pgque.due_queues(i_queue_id): the queues a tick is due for now (all queues
-- when i_queue_id is NULL), with their latest tick id. One set-based query:
-- the event sequence is read with pg_sequence_last_value (no lock, no write)
-- and the latest tick by index, so checking idle queues costs no WAL.
-- Rules (engine.md):
--  * forced, or only the creation tick exists -> due;
--  * with a tick period (queue's, else the installation's): due when the
--    last tick lies in an earlier period slot and there are new events -
--    event ids allocated since, or the last tick counted new event ids and a
--    transaction in progress at it has ended since (it may have inserted
--    events counted by that tick but not visible in it; the ticking
--    transaction itself does not count; at most one extra tick follows).
--    A producer whose xid is at or above the snapshot's xmax is not in its
--    xip list: when the ticking transaction's xid is above xmax (others got
--    xids first), the queue re-ticks once every transaction up to it ended
--    - or when the last tick is ticker_idle_period old;
--  * classic (no period): with new events, due at ticker_max_count events or
--    ticker_max_lag; without, when the lag is >= max_lag/2 and >= twice the
--    previous gap or >= ticker_idle_period.
-- Paused queues and queues with an external ticker are never due.
-- Locks: none. Called by: ticker(), ticker(queue), get_queue_info.
CREATE OR REPLACE FUNCTION pgque.due_queues(i_queue_id int DEFAULT NULL)
RETURNS TABLE (queue_id int, queue_name text, last_tick_id bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH cfg AS (
        SELECT (SELECT value::int FROM pgque.settings WHERE name = 'tick_period_ms') AS default_period
    ), q AS (
        SELECT q.*, coalesce(q.queue_tick_period_ms, cfg.default_period) AS period_ms,
               coalesce(pg_sequence_last_value(q.queue_event_seq), 0) AS cur_seq,
               l.tick_id AS last_id, l.tick_time AS last_time, l.tick_event_seq AS last_seq,
               l.tick_snapshot AS last_snap, l.xmin AS last_xmin, l.tick_new_ids AS last_new_ids,
               -- the tick row's 32-bit xmin widened with the snapshot's epoch
               (SELECT CASE WHEN f < x - 2147483648 THEN f + 4294967296 ELSE f END
                  FROM (SELECT pg_snapshot_xmax(l.tick_snapshot)::text::bigint AS x,
                               (pg_snapshot_xmax(l.tick_snapshot)::text::bigint / 4294967296) * 4294967296
                               + l.xmin::text::bigint AS f) w) AS last_xmin_full
          FROM pgque.queue q
         CROSS JOIN cfg
          LEFT JOIN LATERAL (
                SELECT t.tick_id, t.tick_time, t.tick_event_seq, t.tick_snapshot, t.xmin, t.tick_new_ids
                  FROM pgque.tick t
                 WHERE t.tick_queue = q.queue_id
                 ORDER BY t.tick_id DESC
                 LIMIT 1) l ON true
         WHERE (i_queue_id IS NULL OR q.queue_id = i_queue_id)
           AND NOT q.queue_external_ticker
           AND NOT q.queue_ticker_paused
    )
    SELECT q.queue_id, q.queue_name, q.last_id
      FROM q
     WHERE q.last_id IS NULL
        OR q.queue_force_tick
        OR q.last_id <= 1
        OR now() - q.last_time >= q.queue_ticker_idle_period
        OR CASE
             WHEN q.period_ms IS NOT NULL THEN
                  (q.cur_seq > q.last_seq
                   OR q.last_new_ids > 0 AND (
                          EXISTS (SELECT 1 FROM pg_snapshot_xip(q.last_snap) x
                                   WHERE pg_visible_in_snapshot(x, pg_current_snapshot())
                                     AND x::text::bigint % 4294967296 <> q.last_xmin::text::bigint)
                          -- a transaction newer than the snapshot's xmax (it
                          -- got its xid before the ticking one) has ended
                       OR (q.last_xmin_full > pg_snapshot_xmax(q.last_snap)::text::bigint
                           AND pg_snapshot_xmin(pg_current_snapshot())::text::bigint > q.last_xmin_full)))
              AND floor(extract(epoch FROM now()) * 1000 / q.period_ms)
                > floor(extract(epoch FROM q.last_time) * 1000 / q.period_ms)
             WHEN q.cur_seq > q.last_seq THEN
                  q.cur_seq - q.last_seq >= q.queue_ticker_max_count
               OR now() - q.last_time >= q.queue_ticker_max_lag
             ELSE
                  now() - q.last_time >= q.queue_ticker_max_lag / 2
              AND now() - q.last_time >= 2 * (q.last_time - (
                      SELECT p.tick_time FROM pgque.tick p
                       WHERE p.tick_queue = q.queue_id AND p.tick_id < q.last_id
                       ORDER BY p.tick_id DESC LIMIT 1))
           END;
END;
$$;
