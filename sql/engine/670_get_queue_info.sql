-- pgque.get_queue_info([i_queue_name]): one row per queue: its settings, the
-- effective tick period, the age of its last tick, event rate between the
-- last two ticks, events not yet ticked (ev_new) and pending_events: events
-- the slowest consumer has still to read (unread_events at its cursor: an
-- upper bound by event ids, plus events committed after the tick that
-- numbered them) plus the queue's retries waiting in retry_queue; without
-- consumers the same from the latest tick. 0 means nothing committed is
-- waiting. Dead letters are not pending (dlq_inspect lists them).
-- An unknown queue name raises.
-- VOLATILE (the form without arguments calls this one): the statement
-- takes its snapshot after locking the tick and subscription children, so
-- a subscription rotation it waited behind committed before it (STABLE, it
-- read with the caller's older snapshot: the moved subscriptions missed,
-- pending counted from the latest tick - the uninstall's check for unread
-- events read 0; docs/design/engine.md "Metadata rotation").
-- Locks: ACCESS SHARE on the tick and subscription children.
-- Called by: pgquectl status/uninstall, operators.
CREATE OR REPLACE FUNCTION pgque.get_queue_info(i_queue_name text)
RETURNS TABLE (queue_name text, queue_ntables int, queue_cur_table int, queue_rotation_period interval,
               queue_switch_time timestamptz, queue_external_ticker boolean, queue_ticker_paused boolean,
               queue_ticker_max_count int, queue_ticker_max_lag interval, queue_ticker_idle_period interval,
               queue_tick_period_ms int, ticker_lag interval, ev_per_sec float8, ev_new bigint,
               last_tick_id bigint, last_tick_time timestamptz, pending_events bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT q.queue_name, q.queue_ntables, q.queue_cur_table, q.queue_rotation_period, q.queue_switch_time,
           q.queue_external_ticker, q.queue_ticker_paused, q.queue_ticker_max_count, q.queue_ticker_max_lag,
           q.queue_ticker_idle_period,
           coalesce(q.queue_tick_period_ms, (SELECT s.value::int FROM pgque.settings s WHERE s.name = 'tick_period_ms')),
           now() - l.tick_time,
           CASE WHEN p.tick_time IS NOT NULL AND l.tick_time > p.tick_time
                THEN (l.tick_event_seq - p.tick_event_seq) / extract(epoch FROM l.tick_time - p.tick_time)::float8 END,
           greatest(s.cur_seq - l.tick_event_seq, 0),
           l.tick_id, l.tick_time,
           coalesce(pgque.unread_events(q.queue_id, coalesce(c.cursor_tick, l.tick_id)), 0)
             + (SELECT count(*) FROM pgque.retry_queue r WHERE r.ev_queue = q.queue_id)
      FROM pgque.queue q
     CROSS JOIN LATERAL (SELECT coalesce(pg_sequence_last_value(q.queue_event_seq), 0) AS cur_seq) s
      LEFT JOIN LATERAL (SELECT t.tick_id, t.tick_time, t.tick_event_seq FROM pgque.tick t
                          WHERE t.tick_queue = q.queue_id ORDER BY t.tick_id DESC LIMIT 1) l ON true
      LEFT JOIN LATERAL (SELECT t.tick_time, t.tick_event_seq FROM pgque.tick t
                          WHERE t.tick_queue = q.queue_id AND t.tick_id < l.tick_id
                          ORDER BY t.tick_id DESC LIMIT 1) p ON true
      LEFT JOIN LATERAL (SELECT min(sb.sub_last_tick) AS cursor_tick FROM pgque.subscription sb
                          WHERE sb.sub_queue = q.queue_id) c ON true
     WHERE i_queue_name IS NULL OR q.queue_id = (pgque.find_queue(i_queue_name)).queue_id
     ORDER BY q.queue_name;
$$;

CREATE OR REPLACE FUNCTION pgque.get_queue_info()
RETURNS TABLE (queue_name text, queue_ntables int, queue_cur_table int, queue_rotation_period interval,
               queue_switch_time timestamptz, queue_external_ticker boolean, queue_ticker_paused boolean,
               queue_ticker_max_count int, queue_ticker_max_lag interval, queue_ticker_idle_period interval,
               queue_tick_period_ms int, ticker_lag interval, ev_per_sec float8, ev_new bigint,
               last_tick_id bigint, last_tick_time timestamptz, pending_events bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT * FROM pgque.get_queue_info(NULL::text);
$$;
