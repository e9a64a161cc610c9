-- pgque.group_delete(i_group, i_queue, i_delete_metadata): delete a consumer
-- group from one queue (i_queue) or from all queues (i_queue NULL): its
-- cursors, subscriptions and dead letters; with i_delete_metadata (all
-- queues only) the group's name too. Its next pop starts as a first contact.
-- Returns: cursors deleted. Locks: the deleted rows (waits for running
-- claims). Writes: group_cursor, group_subscription, group_dead_letter,
-- broker_group. Called by: the broker (DELETE /api/v1/consumer-groups/...).
CREATE OR REPLACE FUNCTION pgque.group_delete(i_group text, i_queue text DEFAULT NULL, i_delete_metadata boolean DEFAULT false)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_group int;
    v_queue int;
    v_n     int;
BEGIN
    IF i_queue IS NOT NULL THEN
        v_queue := (pgque.find_queue(i_queue)).queue_id;
    END IF;
    SELECT grp_id INTO v_group FROM pgque.broker_group WHERE grp_name = i_group;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    DELETE FROM pgque.group_cursor WHERE gc_group = v_group AND (v_queue IS NULL OR gc_queue = v_queue);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    DELETE FROM pgque.group_subscription WHERE gs_group = v_group AND (v_queue IS NULL OR gs_queue = v_queue);
    DELETE FROM pgque.group_dead_letter WHERE gdl_group = v_group AND (v_queue IS NULL OR gdl_queue = v_queue);
    IF v_queue IS NULL AND i_delete_metadata THEN
        DELETE FROM pgque.broker_group WHERE grp_id = v_group;
    END IF;
    RETURN v_n;
END;
$$;
