-- pgque.message_uuid(i_queue_id, i_ev_id, i_ev_time): the message id the
-- broker shows for an event, derived (never stored): a version-7 UUID whose
-- 48-bit timestamp is i_ev_time in ms (time-ordered) and whose 74 other bits
-- are the low 20 bits of i_queue_id and the low 54 bits of i_ev_id, so it is
-- unique per event while queue ids stay below 2^20 and event ids below 2^54.
-- Returns: uuid. Locks: none. Writes: nothing. Called by: push, pop_list,
-- group_ack, group_dlq_list. Plain SQL without a SET clause so that the
-- planner inlines it (a SET clause costs ~40 us per row). Without a pinned
-- path its body is parsed under the caller's search_path, so every
-- function is pg_catalog-qualified and every operator is spelled
-- OPERATOR(pg_catalog.x) over operands of its exact types: an operator
-- planted in a schema on the caller's path (e.g. &(bigint, integer), an
-- exact match where pg_catalog's needs a cast) is never chosen.
-- Its body must stay immutable too: PostgreSQL does not inline an IMMUTABLE
-- function whose body calls a STABLE one, and extract(epoch FROM
-- timestamptz) is STABLE - hence the epoch of (time - epoch), an interval
-- (same value; internal/broker TestMessageUUIDInlined checks both).
CREATE OR REPLACE FUNCTION pgque.message_uuid(i_queue_id int, i_ev_id bigint, i_ev_time timestamptz)
RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.encode(
               pg_catalog.int8send(
                   (((pg_catalog.floor(extract(epoch FROM (i_ev_time OPERATOR(pg_catalog.-) '1970-01-01 00:00:00+00'::timestamptz))
                                       OPERATOR(pg_catalog.*) 1000::numeric)::bigint OPERATOR(pg_catalog.<<) 16)
                     OPERATOR(pg_catalog.|) 28672::bigint)
                    OPERATOR(pg_catalog.|) ((i_queue_id OPERATOR(pg_catalog.>>) 8) OPERATOR(pg_catalog.&) 4095)::bigint))
            OPERATOR(pg_catalog.||) pg_catalog.int8send(
                   ((((32768::bigint OPERATOR(pg_catalog.|) ((i_queue_id OPERATOR(pg_catalog.&) 255) OPERATOR(pg_catalog.<<) 6)::bigint)
                      OPERATOR(pg_catalog.|) ((i_ev_id OPERATOR(pg_catalog.>>) 48) OPERATOR(pg_catalog.&) 63::bigint))
                     OPERATOR(pg_catalog.<<) 48)
                    OPERATOR(pg_catalog.|) (i_ev_id OPERATOR(pg_catalog.&) 281474976710655::bigint))),
           'hex')::uuid;
$$;
