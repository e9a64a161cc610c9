-- pgque.group_expire(i_queue_id, i_switch): let consumer groups of a queue
-- with an expiry (queue_expiry: retentionSeconds with retentionEnabled,
-- maxWaitTimeSeconds) stop pinning the queue's event-table rotation with
-- events they will never be served. S is the queue's oldest tick whose
-- xmin is above i_switch (the previous switch's step-2 txid): a cursor
-- starting at S no longer needs the previous event table. Every cursor
-- whose range start is at or below i_switch, that holds no live lease and
-- whose unconsumed events visible in S are all expired (older than now()
-- minus the expiry; an event pops would not serve anyway) moves to S:
-- its range becomes (S, S] with no position when its range end is before
-- S (nothing between is pending but expired events), else its range start
-- alone moves to S (range (S, hi], position kept: what it consumed stays
-- consumed, what is pending after S stays pending). Nothing a group may
-- still be served is skipped, no event row is written; the table is then
-- switched out and truncated by the rotation as for any cursor that read
-- it. Unlike group_advance_idle, a cursor with non-expired events pending
-- after S is moved too. Runs the reads with EXECUTE (a rotation-time
-- statement, planned per call).
-- Returns: cursors moved. Locks: those cursor rows (FOR UPDATE SKIP
-- LOCKED: a cursor being claimed is left for the next attempt).
-- Writes: group_cursor. Called by: group_rotation_pin.
CREATE OR REPLACE FUNCTION pgque.group_expire(i_queue_id int, i_switch xid8)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue;
    v_expiry interval;
    v_tick   bigint;
    v_snap   pg_snapshot;
    v_tables int[];
    v_n      int;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND OR i_switch IS NULL THEN
        RETURN 0;
    END IF;
    v_expiry := pgque.queue_expiry(v_queue.queue_options);
    IF v_expiry IS NULL THEN
        RETURN 0;
    END IF;
    SELECT t.tick_id, t.tick_snapshot INTO v_tick, v_snap
      FROM pgque.tick t
     WHERE t.tick_queue = i_queue_id AND pg_snapshot_xmin(t.tick_snapshot) > i_switch
     ORDER BY t.tick_id LIMIT 1;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    v_tables := ARRAY[v_queue.queue_cur_table,
                      (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables];
    EXECUTE format($sql$
        WITH moved AS (
            SELECT l.gc_group, l.gc_partition, pg_snapshot_xmax(l.gc_hi) < pg_snapshot_xmax($2) AS before
              FROM pgque.group_cursor l
             WHERE l.gc_queue = $1 AND pg_snapshot_xmin(l.gc_lo) <= $4
               AND (l.gc_lease IS NULL OR l.gc_lease_until <= now())
               AND NOT EXISTS (%s) AND NOT EXISTS (%s)
               FOR UPDATE SKIP LOCKED
        )
        UPDATE pgque.group_cursor gc
           SET gc_lo = $2,
               gc_hi = CASE WHEN m.before THEN $2 ELSE gc.gc_hi END,
               gc_tick = CASE WHEN m.before THEN $3 ELSE gc.gc_tick END,
               gc_pos_txid = CASE WHEN m.before THEN NULL ELSE gc.gc_pos_txid END,
               gc_pos = CASE WHEN m.before THEN NULL ELSE gc.gc_pos END,
               gc_lease = CASE WHEN m.before THEN NULL ELSE gc.gc_lease END,
               gc_lease_until = CASE WHEN m.before THEN NULL ELSE gc.gc_lease_until END,
               gc_end_txid = CASE WHEN m.before THEN NULL ELSE gc.gc_end_txid END,
               gc_lease_end = CASE WHEN m.before THEN NULL ELSE gc.gc_lease_end END,
               gc_attempts = CASE WHEN m.before THEN 0 ELSE gc.gc_attempts END,
               gc_fail_ev = CASE WHEN m.before THEN NULL ELSE gc.gc_fail_ev END,
               gc_fails = CASE WHEN m.before THEN 0 ELSE gc.gc_fails END
          FROM moved m
         WHERE gc.gc_queue = $1 AND gc.gc_group = m.gc_group AND gc.gc_partition = m.gc_partition
        $sql$,
        -- unconsumed and visible in S: in (lo, least(hi, S)] after the position ...
        pgque.group_range_sql(i_queue_id, v_tables, 'l.gc_lo',
                              'CASE WHEN pg_snapshot_xmax(l.gc_hi) < pg_snapshot_xmax($2) THEN l.gc_hi ELSE $2 END',
                              'l.gc_pos_txid', 'l.gc_pos', NULL, '1', '-l.gc_group', 'greatest(l.gc_from, $5)'),
        -- ... and in (hi, S] (empty when hi is at or after S)
        pgque.group_range_sql(i_queue_id, v_tables, 'l.gc_hi', '$2', NULL, NULL, NULL, '1', '-l.gc_group',
                              'greatest(l.gc_from, $5)'))
    USING i_queue_id, v_snap, v_tick, i_switch, now() - v_expiry;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
