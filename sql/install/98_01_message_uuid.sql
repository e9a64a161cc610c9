-- pgque.message_uuid(i_queue_id, i_ev_id, i_ev_time): the message id the
-- broker shows for an event, derived (never stored): a version-7 UUID whose
-- 48-bit timestamp is i_ev_time in ms (time-ordered) and whose 74 other bits
-- are the low 20 bits of i_queue_id and the low 54 bits of i_ev_id, so it is
-- unique per event while queue ids stay below 2^20 and event ids below 2^54.
-- Returns: uuid. Locks: none. Writes: nothing. Called by: push, pop_list,
-- group_ack, group_dlq_list.
CREATE OR REPLACE FUNCTION pgque.message_uuid(i_queue_id int, i_ev_id bigint, i_ev_time timestamptz)
RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pgque, pg_catalog
AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM i_ev_time) * 1000)::bigint), 12, '0')
            || '7' || lpad(to_hex((i_queue_id >> 8) & 4095), 3, '0')
            || lpad(to_hex(32768 | ((i_queue_id & 255) << 6) | ((i_ev_id >> 48) & 63)::int), 4, '0')
            || lpad(to_hex(i_ev_id & 281474976710655), 12, '0'))::uuid;
$$;
