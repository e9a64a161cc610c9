-- bench/percall: a claim of (at most) 1 message of partition :pid of queue
-- :q in group g, auto-acked (the position moves past it: no lease, so the
-- next call takes the next message). Run against a ticked backlog (a claim
-- that finds a message) and against a drained partition (a claim that finds
-- nothing); run.sh checks which by the cursor's position.
SELECT count(*) FROM pgque.pop_list(:q::text, 'g', ARRAY[:pid::int], 1, 1, NULL, true, 'all') WHERE message_id IS NOT NULL;
