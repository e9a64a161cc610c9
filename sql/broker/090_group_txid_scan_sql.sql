-- pgque.group_txid_scan_sql(i_queue_id, i_tables, i_from_txid, i_limit): the text of
-- a query over the event tables i_tables of a queue listing (ev_partition,
-- ev_txid, ev_id) of every event with ev_txid >= i_from_txid (a SQL expression:
-- the caller's column or parameter; NULL: no rows), one range scan of each
-- table's ev_txid index in its order, at most i_limit rows (a SQL
-- expression) per table. No visibility rule beyond the statement's own
-- snapshot: it bounds, the caller's exact probe decides.
-- Columns: ev_partition, ev_txid, ev_id.
-- Returns: text. Locks: none. Called by: group_plan_sql (the generated
-- group_pending function: the reseed's candidate partitions).
DROP FUNCTION IF EXISTS pgque.group_txid_scan_sql(int, int[], text);
CREATE OR REPLACE FUNCTION pgque.group_txid_scan_sql(i_queue_id int, i_tables int[], i_from_txid text, i_limit text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_parts text[] := '{}';
    v_n     int;
BEGIN
    FOREACH v_n IN ARRAY i_tables LOOP
        v_parts := v_parts || format('(SELECT e.ev_partition, e.ev_txid, e.ev_id FROM %s e WHERE e.ev_txid >= %s '
                                     'ORDER BY e.ev_txid LIMIT %s)',
                                     pgque.event_table(i_queue_id, v_n), i_from_txid, i_limit);
    END LOOP;
    RETURN array_to_string(v_parts, ' UNION ALL ');
END;
$$;
