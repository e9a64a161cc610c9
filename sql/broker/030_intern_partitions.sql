-- pgque.intern_partitions(i_queue_id, i_names): the dense id and stable UUID
-- of each named partition of a queue, creating the missing ones (ids
-- max + 1, ... in name order). Names are data: 1..512 bytes, no control
-- characters; anything else raises invalid_parameter_value and creates
-- nothing. Returns: (part_name, part_id, part_uuid) per distinct name.
-- Locks: advisory (pgque.lock_id_partition_intern_class(), queue_id) only when a name is new
-- (serializes id allocation per queue). Writes: partition (insert).
-- Called by: push.
CREATE OR REPLACE FUNCTION pgque.intern_partitions(i_queue_id int, i_names text[])
RETURNS TABLE (part_name text, part_id int, part_uuid uuid)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_bad text;
BEGIN
    SELECT n INTO v_bad FROM unnest(i_names) n
     WHERE n IS NULL OR n = '' OR octet_length(n) > 512 OR n ~ '[[:cntrl:]]' LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgque: invalid partition name %: a partition name is 1..512 bytes without control characters',
            CASE WHEN v_bad IS NULL THEN 'NULL' WHEN octet_length(v_bad) > 64 THEN '"' || left(v_bad, 32) || '..." (' || octet_length(v_bad) || ' bytes)'
                 ELSE '"' || v_bad || '"' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(i_names) n
                WHERE NOT EXISTS (SELECT 1 FROM pgque.partition p WHERE p.part_queue = i_queue_id AND p.part_name = n)) THEN
        PERFORM pg_advisory_xact_lock(pgque.lock_id_partition_intern_class(), i_queue_id);
        INSERT INTO pgque.partition (part_queue, part_id, part_name)
        SELECT i_queue_id,
               coalesce((SELECT max(p.part_id) FROM pgque.partition p WHERE p.part_queue = i_queue_id), -1)
               + row_number() OVER (ORDER BY m.n),
               m.n
          FROM (SELECT DISTINCT n FROM unnest(i_names) n
                 WHERE NOT EXISTS (SELECT 1 FROM pgque.partition p WHERE p.part_queue = i_queue_id AND p.part_name = n)) m
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN QUERY
    SELECT p.part_name, p.part_id, p.part_uuid FROM pgque.partition p
     WHERE p.part_queue = i_queue_id AND p.part_name = ANY (i_names);
END;
$$;
