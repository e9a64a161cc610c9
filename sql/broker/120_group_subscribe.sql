-- pgque.group_subscribe(i_queue_id, i_group, i_mode, i_from): the group's id
-- (the name interned in broker_group), subscribing the group to the queue on
-- first contact; later calls change nothing (the first contact decides).
-- Modes (Queen's): 'all' (the default: NULL or '') starts at the oldest
-- retained event; 'new' (or its alias 'new-only') at the current snapshot
-- (what commits after it is delivered; no tick involved); i_from set: events created at
-- or after i_from. The queue-mode group __QUEUE_MODE__ is always 'all': it
-- never skips the backlog.
-- Group names: 1..255 bytes, no control characters; bad names or modes raise
-- invalid_parameter_value. Returns: grp_id. Locks: none beyond the inserts.
-- Writes: broker_group, group_subscription (first contact only).
-- Called by: pop_list, pop_any, group_seek.
CREATE OR REPLACE FUNCTION pgque.group_subscribe(i_queue_id int, i_group text, i_mode text, i_from timestamptz)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_id   int;
    v_mode text := CASE coalesce(i_mode, '') WHEN '' THEN 'all' WHEN 'new-only' THEN 'new' ELSE i_mode END;
    v_lo   pg_snapshot;
BEGIN
    IF i_group IS NULL OR i_group = '' OR octet_length(i_group) > 255 OR i_group ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'pgque: invalid consumer group name %: 1..255 bytes without control characters',
            coalesce('"' || left(i_group, 64) || '"', 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_mode NOT IN ('new', 'all') THEN
        RAISE EXCEPTION 'pgque: invalid subscription mode "%": all, new or new-only (or a from timestamp)', v_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT grp_id INTO v_id FROM pgque.broker_group WHERE grp_name = i_group;
    IF NOT FOUND THEN
        INSERT INTO pgque.broker_group (grp_name) VALUES (i_group) ON CONFLICT (grp_name) DO NOTHING;
        SELECT grp_id INTO v_id FROM pgque.broker_group WHERE grp_name = i_group;
    END IF;
    IF EXISTS (SELECT 1 FROM pgque.group_subscription WHERE gs_queue = i_queue_id AND gs_group = v_id) THEN
        RETURN v_id;
    END IF;
    IF i_group = pgque.queue_mode_group() THEN
        v_mode := 'all';
    ELSIF i_from IS NOT NULL THEN
        v_mode := 'from';
    END IF;
    IF v_mode = 'new' THEN
        -- what is committed now is skipped; a transaction in flight is in
        -- its xip, so its events are delivered
        v_lo := pg_current_snapshot();
    END IF;
    INSERT INTO pgque.group_subscription (gs_queue, gs_group, gs_mode, gs_lo, gs_from)
    VALUES (i_queue_id, v_id, v_mode, coalesce(v_lo, '1:1:'::pg_snapshot), CASE WHEN v_mode = 'from' THEN i_from END)
    ON CONFLICT DO NOTHING;
    RETURN v_id;
END;
$$;
