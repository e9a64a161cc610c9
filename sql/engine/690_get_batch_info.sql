-- pgque.get_batch_info(x_batch_id): an open batch's queue, consumer, tick
-- bounds and times, lag, and event-sequence bounds. Unknown or finished
-- batch: no row. VOLATILE: the statement takes its snapshot after locking
-- the subscription and tick children, so a subscription rotation it waited
-- behind committed before it (STABLE, an open batch whose row the rotation
-- moved read as unknown; docs/design/engine.md "Metadata rotation").
-- Locks: ACCESS SHARE on the subscription and tick children.
-- Called by: PgQ-style consumers, operators.
CREATE OR REPLACE FUNCTION pgque.get_batch_info(x_batch_id bigint)
RETURNS TABLE (queue_name text, consumer_name text, batch_start timestamptz, batch_end timestamptz,
               prev_tick_id bigint, tick_id bigint, lag interval, seq_start bigint, seq_end bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT q.queue_name, c.co_name, p.tick_time, n.tick_time, s.sub_last_tick, s.sub_next_tick,
           now() - n.tick_time, p.tick_event_seq, n.tick_event_seq
      FROM (SELECT (pgque.delivery_sub(x_batch_id)).*
            UNION ALL
            SELECT * FROM pgque.subscription r
             WHERE r.sub_batch = x_batch_id AND x_batch_id < 4611686018427387904) s
      JOIN pgque.queue q ON q.queue_id = s.sub_queue
      JOIN pgque.consumer c ON c.co_id = s.sub_consumer
      JOIN pgque.tick p ON p.tick_queue = s.sub_queue AND p.tick_id = s.sub_last_tick
      JOIN pgque.tick n ON n.tick_queue = s.sub_queue AND n.tick_id = s.sub_next_tick
     WHERE s.sub_id IS NOT NULL;
$$;
