-- pgque.group_range_sql(i_queue_id, i_tables, i_lo, i_hi, i_pos_txid, i_pos,
-- i_end_txid, i_limit, i_owner, i_from): the text of a query over a
-- partition's events in the range (lo, hi] - visible in snapshot hi, not in
-- snapshot lo - after the position (pos_txid, pos) (NULL: from the start),
-- with ev_txid <= end_txid (NULL: no bound), owned by nobody or by i_owner,
-- created at or after i_from (NULL: any), in (ev_txid, ev_id) order, at
-- most i_limit rows (NULL: all). Every i_* but i_queue_id / i_tables is a
-- SQL expression (the caller's columns or parameters); the partition is
-- l.gc_partition. The txid range is scanned from the later of xmax(lo)
-- and the position (index (ev_partition, ev_txid, ev_id) in its order:
-- the partition by equality, the start as one (ev_txid, ev_id) row
-- comparison, the end as ev_txid bounds, stopping after i_limit rows or at
-- the end bound: the rows read are the rows returned, whatever the backlog
-- before or after the range). The start used to be one (ev_partition,
-- ev_txid, ev_id) row comparison beside the equality: B-tree then takes
-- the equality as its start key and cannot use the row comparison for the
-- later columns, so every read started at the partition's first retained
-- event and filtered its way up to the position (86 index blocks for a
-- pop of 1 message after 8,000 consumed events, 45 for its ack:
-- TestGroupRangeReadsStartAtPosition). Without the equality the start
-- works but the end does not stop the scan (a row comparison decided on a
-- later column is no required key): the scan ran on through the backlog
-- after the range. The (ev_txid) index can serve these bounds too: the
-- generated functions price its sort out (enable_sort and
-- enable_incremental_sort off, group_plans), so that after an ANALYZE it
-- does not read every partition's events of the range (a reseed over 16
-- partitions and 200,000 consumed events: 4.7 s); they also switch off
-- bitmap and sequential scans. Besides the range scan, lo's in-progress
-- xids are read, one (ev_partition, ev_txid) probe each (none
-- when lo had none), so a held xmin does not widen it (OFFSET 0 keeps that
-- subquery a per-xid probe: flattened, the planner scanned the partition's
-- every event and joined the xids to them).
-- Deleted messages (message_tombstone, DELETE /api/v1/messages) are left
-- out of every read without an end bound; the reads with one (i_end_txid:
-- group_ack's reads of a leased batch and below the position) keep them,
-- so a consumer holding a batch can still ack every message it was given
-- and its lease ends at the batch end as before. The test is an
-- uncorrelated EXISTS on the queue (an InitPlan: one index probe per read,
-- evaluated once per statement) OR the per-event probe, which therefore
-- never runs while the queue has no deleted message.
-- Columns: ev_id, ev_time, ev_txid, ev_data, ev_extra1.
-- Returns: text. Locks: none. Called by: group_plan_sql (the generated
-- functions of pop_list, group_ack, group_pending, group_advance_idle),
-- queue_depth.
CREATE OR REPLACE FUNCTION pgque.group_range_sql(i_queue_id int, i_tables int[], i_lo text, i_hi text,
                                                 i_pos_txid text, i_pos text, i_end_txid text, i_limit text,
                                                 i_owner text, i_from text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_common text;
    v_parts  text[] := '{}';
    v_n      int;
    v_lim    text := CASE WHEN i_limit IS NULL THEN '' ELSE ' LIMIT ' || i_limit END;
BEGIN
    v_common := format('AND pg_visible_in_snapshot(e.ev_txid, %2$s) AND NOT pg_visible_in_snapshot(e.ev_txid, %1$s) '
                       'AND (e.ev_owner IS NULL OR e.ev_owner = %3$s) AND (%4$s IS NULL OR e.ev_time >= %4$s) '
                       'AND (%5$s IS NULL OR (e.ev_txid, e.ev_id) > (%5$s, %6$s)) '
                       'AND (%7$s IS NULL OR e.ev_txid <= %7$s)',
                       i_lo, i_hi, i_owner, coalesce(i_from, 'NULL::timestamptz'),
                       coalesce(i_pos_txid, 'NULL::xid8'), coalesce(i_pos, 'NULL::bigint'), coalesce(i_end_txid, 'NULL::xid8'))
                || CASE WHEN i_end_txid IS NULL THEN format(
                       ' AND (NOT (SELECT EXISTS (SELECT 1 FROM pgque.message_tombstone mt WHERE mt.mt_queue = %1$s)) '
                       'OR NOT EXISTS (SELECT 1 FROM pgque.message_tombstone mt '
                       'WHERE mt.mt_queue = %1$s AND mt.mt_ev_id = e.ev_id))', i_queue_id) ELSE '' END;
    FOREACH v_n IN ARRAY i_tables LOOP
        v_parts := v_parts
            || format('(SELECT e.ev_id, e.ev_time, e.ev_txid, e.ev_data, e.ev_extra1 '
                      'FROM pg_snapshot_xip(%s) xip(txid) CROSS JOIN LATERAL (SELECT e.* FROM %s e '
                      'WHERE e.ev_partition = l.gc_partition AND e.ev_txid = xip.txid %s OFFSET 0) e)',
                      i_lo, pgque.event_table(i_queue_id, v_n), v_common)
            || format('(SELECT e.ev_id, e.ev_time, e.ev_txid, e.ev_data, e.ev_extra1 FROM %1$s e '
                      'WHERE e.ev_partition = l.gc_partition '
                      'AND (e.ev_txid, e.ev_id) > ('
                      'CASE WHEN %3$s IS NULL OR %3$s < pg_snapshot_xmax(%2$s) THEN pg_snapshot_xmax(%2$s) ELSE %3$s END, '
                      'CASE WHEN %3$s IS NULL OR %3$s < pg_snapshot_xmax(%2$s) THEN -9223372036854775808 ELSE %4$s END) '
                      'AND e.ev_txid < pg_snapshot_xmax(%5$s) AND e.ev_txid <= least(%6$s, pg_snapshot_xmax(%5$s)) '
                      '%7$s ORDER BY e.ev_partition, e.ev_txid, e.ev_id%8$s)',
                      pgque.event_table(i_queue_id, v_n), i_lo, coalesce(i_pos_txid, 'NULL::xid8'),
                      coalesce(i_pos, 'NULL::bigint'), i_hi, coalesce(i_end_txid, 'NULL::xid8'), v_common, v_lim);
    END LOOP;
    RETURN 'SELECT * FROM (' || array_to_string(v_parts, ' UNION ALL ') || ') x ORDER BY x.ev_txid, x.ev_id' || v_lim;
END;
$$;
-- Upgrade: event tables of queues created before the broker read in
-- (ev_txid, ev_id) order carry an (ev_partition, ev_txid) index; rebuild it
-- as (ev_partition, ev_txid, ev_id) under the same name (idempotent).
DO $upgrade$
DECLARE
    v_idx record;
BEGIN
    FOR v_idx IN
        SELECT c.relname AS idx, t.oid::regclass AS tbl
          FROM pg_catalog.pg_index i
          JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
          JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
         WHERE t.relnamespace = 'pgque'::regnamespace AND c.relname ~ '^event_[0-9]+_[0-9]+_part_idx$'
           AND i.indnatts = 2
    LOOP
        EXECUTE format('DROP INDEX pgque.%I', v_idx.idx);
        EXECUTE format('CREATE INDEX %I ON %s (ev_partition, ev_txid, ev_id)', v_idx.idx, v_idx.tbl);
    END LOOP;
END;
$upgrade$;
