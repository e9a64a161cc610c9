-- pgque.tick_need(): per queue, the oldest tick anybody may still read:
-- cursor_tick is the slowest consumer's cursor (NULL without consumers) and
-- min_tick = least(cursor_tick, the second-latest tick, the latest tick) -
-- the ticker's rules look at the last two. Ticks below min_tick may go.
-- VOLATILE: its statement takes its snapshot after locking the tick and
-- subscription children, so a subscription rotation it waited behind
-- committed before it. STABLE, it read with the caller's older snapshot
-- (maint_rotate_tables_step1's statement): the moved subscriptions
-- missed, cursor_tick NULL, and step 1 switched out an event table a
-- consumer had not read yet (docs/design/engine.md "Metadata rotation").
-- Locks: ACCESS SHARE on the tick and subscription children.
-- Called by: rotate_metadata, maint_rotate_tables_step1, status.
CREATE OR REPLACE FUNCTION pgque.tick_need()
RETURNS TABLE (queue_id int, cursor_tick bigint, min_tick bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT q.queue_id, c.cursor_tick,
           least(c.cursor_tick,
                 (SELECT t.tick_id FROM pgque.tick t WHERE t.tick_queue = q.queue_id
                   ORDER BY t.tick_id DESC OFFSET 1 LIMIT 1),
                 (SELECT max(t.tick_id) FROM pgque.tick t WHERE t.tick_queue = q.queue_id))
      FROM pgque.queue q
      LEFT JOIN LATERAL (SELECT min(s.sub_last_tick) AS cursor_tick
                           FROM pgque.subscription s WHERE s.sub_queue = q.queue_id) c ON true;
$$;
