-- pgque.get_consumer_info([i_queue_name[, i_consumer_name]]): one row per
-- subscription: lag (age of its cursor tick), last_seen (since its last batch
-- operation), cursor, open batch, and pending_events (unread_events at its
-- cursor - an upper bound by event ids plus events committed after the tick
-- that numbered them - plus its retries waiting in retry_queue).
-- Unknown queue raises. VOLATILE (the shorter forms call this one): the
-- statement takes its snapshot after locking the subscription and tick
-- children, so a subscription rotation it waited behind committed before
-- it (STABLE, it read with the caller's older snapshot and left the moved
-- subscriptions out; docs/design/engine.md "Metadata rotation").
-- Locks: ACCESS SHARE on the subscription and tick children.
-- Called by: pgquectl status, operators.
CREATE OR REPLACE FUNCTION pgque.get_consumer_info(i_queue_name text, i_consumer_name text)
RETURNS TABLE (queue_name text, consumer_name text, lag interval, last_seen interval, last_tick bigint,
               current_batch bigint, next_tick bigint, pending_events bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT q.queue_name, c.co_name, now() - t.tick_time, now() - greatest(s.sub_active, d.leased_at), s.sub_last_tick,
           coalesce(d.batch_id, s.sub_batch), coalesce(d.end_tick, s.sub_next_tick),
           coalesce(pgque.unread_events(q.queue_id, s.sub_last_tick), 0)
             + (SELECT count(*) FROM pgque.retry_queue r WHERE r.ev_owner = s.sub_id)
      FROM pgque.subscription s
      JOIN pgque.queue q ON q.queue_id = s.sub_queue
      JOIN pgque.consumer c ON c.co_id = s.sub_consumer
      LEFT JOIN pgque.tick t ON t.tick_queue = s.sub_queue AND t.tick_id = s.sub_last_tick
      CROSS JOIN LATERAL pgque.delivery_state(s.sub_id) d
     WHERE (i_queue_name IS NULL OR q.queue_id = (pgque.find_queue(i_queue_name)).queue_id)
       AND (i_consumer_name IS NULL OR c.co_name = i_consumer_name)
     ORDER BY q.queue_name, c.co_name;
$$;

CREATE OR REPLACE FUNCTION pgque.get_consumer_info(i_queue_name text)
RETURNS TABLE (queue_name text, consumer_name text, lag interval, last_seen interval, last_tick bigint,
               current_batch bigint, next_tick bigint, pending_events bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT * FROM pgque.get_consumer_info(i_queue_name, NULL);
$$;

CREATE OR REPLACE FUNCTION pgque.get_consumer_info()
RETURNS TABLE (queue_name text, consumer_name text, lag interval, last_seen interval, last_tick bigint,
               current_batch bigint, next_tick bigint, pending_events bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT * FROM pgque.get_consumer_info(NULL, NULL);
$$;
