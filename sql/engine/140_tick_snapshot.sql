-- pgque.tick_snapshot(): pg_current_snapshot() as a tick must record it:
-- with this transaction's own xid (if it has one) counted as in progress.
-- PostgreSQL leaves a backend's own xid out of its snapshot's xip list, so a
-- tick taken in the transaction that inserted events could otherwise make
-- those events look visible already at that tick, and no batch would carry
-- them. Returns: pg_snapshot. Locks: none. Called by: tick_queue.
CREATE OR REPLACE FUNCTION pgque.tick_snapshot()
RETURNS pg_snapshot
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_snap pg_snapshot := pg_current_snapshot();
    v_own  xid8 := pg_current_xact_id_if_assigned();
BEGIN
    IF v_own IS NULL OR v_own >= pg_snapshot_xmax(v_snap) THEN
        RETURN v_snap;
    END IF;
    RETURN (least(pg_snapshot_xmin(v_snap), v_own)::text || ':' || pg_snapshot_xmax(v_snap)::text || ':' ||
            coalesce((SELECT string_agg(x::text, ',' ORDER BY x)
                        FROM (SELECT pg_snapshot_xip(v_snap) AS x UNION SELECT v_own) s), ''))::pg_snapshot;
END;
$$;
