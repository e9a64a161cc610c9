-- pgque.group_set_subscription(i_group, i_queue_prefix, i_mode, i_from):
-- change where consumer group i_group's subscriptions start, on every queue
-- it has subscribed to whose name starts with i_queue_prefix (NULL or '':
-- every queue): mode 'new' (alias 'new-only') -> at each queue's current
-- snapshot, 'all' -> at the oldest retained event, i_from set (mode NULL or
-- 'from') -> at the events created at or after i_from. It decides where the cursors of partitions
-- the group reaches later start; cursors the group already has keep their
-- position (group_seek moves those). __QUEUE_MODE__ stays 'all' (queue
-- mode never skips the backlog): changing it is an error.
-- Errors: bad mode / group name / mode and time mismatch ->
-- invalid_parameter_value; the group has no matching subscription ->
-- undefined_object (nothing changed).
-- Returns: the subscriptions changed. Locks: those subscription rows.
-- Writes: group_subscription. Called by: the broker
-- (POST /api/v1/consumer-groups/:group/subscription).
CREATE OR REPLACE FUNCTION pgque.group_set_subscription(i_group text, i_queue_prefix text, i_mode text,
                                                       i_from timestamptz)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_mode text := CASE coalesce(i_mode, '') WHEN '' THEN CASE WHEN i_from IS NULL THEN NULL ELSE 'from' END
                                             WHEN 'new-only' THEN 'new' ELSE i_mode END;
    v_n    int;
BEGIN
    IF v_mode IS NULL OR v_mode NOT IN ('new', 'all', 'from') OR (v_mode = 'from') <> (i_from IS NOT NULL) THEN
        RAISE EXCEPTION 'pgque: invalid subscription: mode "%" with timestamp %: give all, new (new-only), or a timestamp',
            coalesce(left(i_mode, 64), 'NULL'), coalesce(i_from::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF i_group IS NULL OR i_group = '' OR octet_length(i_group) > 255 OR i_group ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'pgque: invalid consumer group name %: 1..255 bytes without control characters',
            coalesce('"' || left(i_group, 64) || '"', 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF i_group = pgque.queue_mode_group() THEN
        RAISE EXCEPTION 'pgque: the queue-mode group % always reads every retained event; its subscription cannot change', pgque.queue_mode_group()
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Seek it per queue instead.';
    END IF;
    UPDATE pgque.group_subscription gs
       SET gs_mode = v_mode,
           gs_from = CASE WHEN v_mode = 'from' THEN i_from END,
           gs_lo = CASE WHEN v_mode = 'new' THEN pg_current_snapshot() ELSE '1:1:'::pg_snapshot END
      FROM pgque.broker_group g, pgque.queue q
     WHERE g.grp_name = i_group AND gs.gs_group = g.grp_id AND q.queue_id = gs.gs_queue
       AND (coalesce(i_queue_prefix, '') = '' OR starts_with(q.queue_name, i_queue_prefix));
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n = 0 THEN
        RAISE EXCEPTION 'pgque: consumer group "%" has no subscription to change', left(i_group, 255)
            USING ERRCODE = 'undefined_object', HINT = 'A group subscribes on its first pop.';
    END IF;
    RETURN v_n;
END;
$$;
