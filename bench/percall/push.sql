-- bench/percall: a push of 1 message (no transactionId) to partition p of
-- queue :q (created by the first push). One transaction per call.
SELECT count(*) FROM pgque.push(ARRAY[:q::text], ARRAY['p'], ARRAY['{"n": 1}'::jsonb], NULL);
