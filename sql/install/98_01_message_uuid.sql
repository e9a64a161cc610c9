-- pgque.message_uuid(i_queue_id, i_ev_id, i_ev_time): the message id the
-- broker shows for an event, derived (never stored): a version-7 UUID whose
-- 48-bit timestamp is i_ev_time in ms (time-ordered) and whose 74 other bits
-- are the low 20 bits of i_queue_id and the low 54 bits of i_ev_id, so it is
-- unique per event while queue ids stay below 2^20 and event ids below 2^54.
-- Returns: uuid. Locks: none. Writes: nothing. Called by: push, pop_list,
-- group_ack, group_dlq_list. Plain SQL without a SET clause so that the
-- planner inlines it (a SET clause costs ~40 us per row); every name in it
-- is pg_catalog's, which PostgreSQL searches first unless told otherwise.
-- Its body must stay immutable too: PostgreSQL does not inline an IMMUTABLE
-- function whose body calls a STABLE one, and extract(epoch FROM
-- timestamptz) is STABLE - hence the epoch of (time - epoch), an interval
-- (same value; internal/broker TestMessageUUIDInlined checks both).
CREATE OR REPLACE FUNCTION pgque.message_uuid(i_queue_id int, i_ev_id bigint, i_ev_time timestamptz)
RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.encode(
               pg_catalog.int8send((floor(extract(epoch FROM i_ev_time - '1970-01-01 00:00:00+00'::timestamptz) * 1000)::bigint << 16)
                                   | 28672 | ((i_queue_id >> 8) & 4095))
            || pg_catalog.int8send(((32768 | ((i_queue_id & 255) << 6) | ((i_ev_id >> 48) & 63))::bigint << 48)
                                   | (i_ev_id & 281474976710655)),
           'hex')::uuid;
$$;
