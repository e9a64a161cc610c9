-- 020_types.sql: composite types of the API.

-- pgque.message: one event as receive() returns it (PgQue 0.2 shape).
DO $types$
BEGIN
    IF to_regtype('pgque.message') IS NULL THEN
        CREATE TYPE pgque.message AS (
            msg_id      bigint,
            batch_id    bigint,
            type        text,
            payload     text,
            retry_count int4,
            created_at  timestamptz,
            extra1      text,
            extra2      text,
            extra3      text,
            extra4      text
        );
    END IF;
END
$types$;
