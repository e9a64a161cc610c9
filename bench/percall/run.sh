#!/usr/bin/env bash
# bench/percall/run.sh: the per-call cost of the broker's SQL calls, one
# pgbench session per call kind, engine A and engine B alternated (A B A B).
# See README.md (method, what each row means).
#
# usage: run.sh [-d DSN] [-T secs] [-r rounds] [-w warm] A_PGQUECTL [B_PGQUECTL]
#   -d DSN   a database to use (superuser; the engine is installed into it
#            with "pgquectl install --reinstall"); default: a private
#            PostgreSQL started under a temp dir ($PGBIN, as user postgres)
#   -T secs  length of each pgbench run (default 20)
#   -r N     rounds of A B (default 2)
#   -w secs  CPU sampling skips this much at each end of a run (default 2)
#   B_PGQUECTL defaults to A_PGQUECTL (A = B: the noise of the method).
# env: PGBIN (default /usr/lib/postgresql/15/bin), PERCALL_RATE (the
#   highest calls/s a backlog must cover, default 4000), OUT (results dir,
#   default: a temp dir, printed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
RATE=${PERCALL_RATE:-4000}
DSN=""
T=20
ROUNDS=2
WARM=2
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while getopts d:T:r:w:h opt; do
    case $opt in
        d) DSN=$OPTARG ;;
        T) T=$OPTARG ;;
        r) ROUNDS=$OPTARG ;;
        w) WARM=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] && [ $# -le 2 ] || usage
BIN_A=$(realpath "$1")
BIN_B=$(realpath "${2:-$1}")
for b in "$BIN_A" "$BIN_B"; do
    [ -x "$b" ] || { echo "run.sh: $b is not an executable pgquectl" >&2; exit 2; }
done
if [ "$((T - 2 * WARM))" -lt 2 ]; then
    echo "run.sh: -T $T leaves less than 2 s between the -w $WARM margins" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/percall.XXXXXX")
chmod 755 "$work"
OUT=${OUT:-$work/results}
mkdir -p "$OUT"
private=""
cleanup() {
    if [ -n "$private" ]; then
        runuser -u postgres -- "$PGBIN/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    if [ "$OUT" != "$work/results" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

if [ -z "$DSN" ]; then
    # A private cluster: unix socket in $work only, fsync and synchronous
    # commit on (the defaults: a call's commit is flushed, as in production),
    # no autovacuum (its WAL would land in the cluster-wide WAL counts), no
    # checkpoint inside a run.
    chown postgres "$work"
    runuser -u postgres -- "$PGBIN/initdb" -D "$work/data" -U postgres -A trust >"$work/initdb.log"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$work/data" -l "$work/postgres.log" -w \
        -o "-c listen_addresses='' -k $work -p 5432 -c autovacuum=off -c max_wal_size=8GB -c checkpoint_timeout=1h" \
        start >/dev/null
    private=1
    DSN="host=$work port=5432 user=postgres dbname=postgres"
    psql -X -q -d "$DSN" -c 'CREATE DATABASE percall' >/dev/null
    DSN="host=$work port=5432 user=postgres dbname=percall"
fi

app="percall-$$"
# sql runs one statement in its own session (application_name $app-setup).
sql() { PGAPPNAME="$app-setup" psql -X -q -At -v ON_ERROR_STOP=1 -d "$DSN" -c "$1"; }
# quiesce waits until this script's other sessions are gone (their WAL
# statistics are flushed when they exit).
quiesce() {
    local i
    for i in $(seq 1 200); do
        [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '$app%' AND pid <> pg_backend_pid()")" = 0 ] && return 0
        sleep 0.05
    done
    echo "run.sh: sessions of $app still open after 10 s" >&2
    return 1
}
walrecs() { sql "SELECT wal_records FROM pg_stat_wal"; }
part_id() { sql "SELECT p.part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue WHERE q.queue_name = '$1' AND p.part_name = 'p'"; }
# cursor prints "position lease" of group g on partition p of queue $1.
cursor() {
    sql "SELECT coalesce(gc.gc_pos, 0) || ' ' || coalesce(gc.gc_lease::text, '-') FROM pgque.group_cursor gc
           JOIN pgque.broker_group g ON g.grp_id = gc.gc_group AND g.grp_name = 'g'
           JOIN pgque.partition p ON p.part_queue = gc.gc_queue AND p.part_id = gc.gc_partition AND p.part_name = 'p'
           JOIN pgque.queue q ON q.queue_id = p.part_queue AND q.queue_name = '$1'"
}
# events prints the number of events of queue $1 (all its event tables).
events() {
    sql "SELECT sum((xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %s', pgque.event_table(q.queue_id, n)), false, true, '')))[1]::text::bigint)
           FROM pgque.queue q CROSS JOIN generate_series(0, q.queue_ntables - 1) n WHERE q.queue_name = '$1'"
}
# backlog pushes $2 messages to partition p of queue $1 and ticks it.
backlog() {
    local left=$2 k
    while [ "$left" -gt 0 ]; do
        k=$((left < 10000 ? left : 10000))
        sql "SELECT count(*) FROM pgque.push(array_fill('$1'::text, ARRAY[$k]), array_fill('p'::text, ARRAY[$k]),
                                             array_fill('{\"n\": 1}'::jsonb, ARRAY[$k]), NULL)" >/dev/null
        left=$((left - k))
    done
    sql "SELECT pgque.broker_tick('$1')" >/dev/null
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# bench NAME SCRIPT [pgbench -D vars...]: one pgbench session of $T s; writes
# $OUT/NAME.pgbench and prints "tps calls cpu_us_per_call wal_per_call".
bench() {
    local name=$1 script=$2
    shift 2
    local vars=() v
    for v in "$@"; do vars+=(-D "$v"); done
    quiesce
    local w0 w1 pid="" i c0 hz tps calls cpu
    hz=$(getconf CLK_TCK)
    w0=$(walrecs)
    PGAPPNAME="$app-bench" pgbench -n -c 1 -T "$T" -M prepared -r "${vars[@]}" -f "$here/$script" "$DSN" >"$OUT/$name.pgbench" 2>&1 &
    local bg=$!
    for i in $(seq 1 200); do
        pid=$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = '$app-bench'")
        [ -n "$pid" ] && break
        sleep 0.02
    done
    # CPU samples (time, utime + stime) every 0.2 s while the backend lives;
    # the window is [first + warm, last - warm].
    : >"$OUT/$name.cpu"
    if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
        while kill -0 "$bg" 2>/dev/null; do
            c0=$(ticks "$pid" 2>/dev/null) || break
            echo "$(date +%s.%N) $c0" >>"$OUT/$name.cpu"
            sleep 0.2
        done
    fi
    if ! wait "$bg"; then
        echo "run.sh: pgbench $name failed:" >&2
        cat "$OUT/$name.pgbench" >&2
        exit 1
    fi
    quiesce
    w1=$(walrecs)
    tps=$(awk '/^tps = /{printf "%.1f", $3; exit}' "$OUT/$name.pgbench")
    calls=$(awk -F': ' '/number of transactions actually processed/{print $2; exit}' "$OUT/$name.pgbench")
    cpu=$(awk -v hz="$hz" -v tps="$tps" -v warm="$WARM" '
        { t[NR] = $1; c[NR] = $2 }
        END {
            if (NR < 2) { print "n/a"; exit }   # the server is not on this machine
            for (i = 1; i <= NR && t[i] < t[1] + warm; i++) ;
            for (j = NR; j >= 1 && t[j] > t[NR] - warm; j--) ;
            if (i >= j) { print "n/a"; exit }
            printf "%.0f", (c[j] - c[i]) / hz * 1e6 / (tps * (t[j] - t[i]))
        }' "$OUT/$name.cpu")
    echo "$tps $calls $cpu $(awk -v a="$w0" -v b="$w1" -v n="$calls" 'BEGIN { printf "%.2f", (b - a) / n }')"
}

check() { # check WHAT GOT WANT
    if [ "$2" != "$3" ]; then
        echo "run.sh: $1: got $2, want $3" >&2
        exit 1
    fi
}

declare -A R # R[run,metric]
runs=()
for round in $(seq 1 "$ROUNDS"); do
    for label in A B; do
        bin=$BIN_A
        [ $label = B ] && bin=$BIN_B
        run="$label$round"
        runs+=("$run")
        sfx=$(echo "${run}_$$" | tr 'A-Z' 'a-z')
        "$bin" install --reinstall --dsn "$DSN" >"$OUT/$run.install" 2>&1 || { cat "$OUT/$run.install" >&2; exit 1; }
        echo "== $run: $bin" >&2

        # 1. push of 1 message (the queue and its partition exist).
        q=pc_push_$sfx
        sql "SELECT count(*) FROM pgque.push(ARRAY['$q'], ARRAY['p'], ARRAY['{}'::jsonb], NULL)" >/dev/null
        e0=$(events "$q")
        bench "$run.push" push.sql "q=$q" >"$work/cell"
        read -r tps calls cpu wal <"$work/cell"
        check "$run push: events added" "$(($(events "$q") - e0))" "$calls"
        R[$run,push_tps]=$tps R[$run,push_cpu]=$cpu R[$run,push_wal]=$wal

        # 2. claim that finds a message: a ticked backlog, the group seeded
        # (one claim), every call takes the next message (auto-ack).
        q=pc_claim_$sfx
        backlog "$q" "$((RATE * T))"
        sql "SELECT count(*) FROM pgque.pop_list('$q', 'g', ARRAY[$(part_id "$q")], 1, 1, NULL, true, 'all')" >/dev/null
        read -r p0 _ < <(cursor "$q")
        bench "$run.claim" claim.sql "q=$q" "pid=$(part_id "$q")" >"$work/cell"
        read -r tps calls cpu wal <"$work/cell"
        read -r p1 _ < <(cursor "$q")
        check "$run claim: messages taken (position moved)" "$((p1 - p0))" "$calls"
        R[$run,claim_tps]=$tps R[$run,claim_cpu]=$cpu R[$run,claim_wal]=$wal

        # 3. claim that finds nothing: the group seeded, the partition drained.
        q=pc_empty_$sfx
        backlog "$q" 1
        sql "SELECT count(*) FROM pgque.pop_list('$q', 'g', ARRAY[$(part_id "$q")], 10, 1, NULL, true, 'all')" >/dev/null
        read -r p0 _ < <(cursor "$q")
        bench "$run.empty" claim.sql "q=$q" "pid=$(part_id "$q")" >"$work/cell"
        read -r tps calls cpu wal <"$work/cell"
        read -r p1 _ < <(cursor "$q")
        check "$run empty claim: position moved" "$((p1 - p0))" 0
        R[$run,empty_tps]=$tps R[$run,empty_cpu]=$cpu R[$run,empty_wal]=$wal

        # 4. leasing claim + ack of that message (two transactions).
        q=pc_ack_$sfx
        backlog "$q" "$((RATE * T))"
        sql "SELECT count(*) FROM pgque.pop_list('$q', 'g', ARRAY[$(part_id "$q")], 1, 1, NULL, true, 'all')" >/dev/null
        read -r p0 _ < <(cursor "$q")
        bench "$run.popack" popack.sql "q=$q" "pid=$(part_id "$q")" >"$work/cell"
        read -r tps calls cpu wal <"$work/cell"
        read -r p1 lease < <(cursor "$q")
        check "$run pop+ack: messages acked (position moved)" "$((p1 - p0))" "$calls"
        check "$run pop+ack: lease left" "$lease" "-"
        R[$run,popack_tps]=$tps R[$run,popack_cpu]=$cpu R[$run,popack_wal]=$wal
        R[$run,ack_ms]=$(awk '/statement latencies/{on=1; next} on && /group_ack/ {print $1; exit}' "$OUT/$run.popack.pgbench")
        R[$run,pop_ms]=$(awk '/statement latencies/{on=1; next} on && /pop_list/ {print $1; exit}' "$OUT/$run.popack.pgbench")
        R[$run,ack_tps]=$(awk -v ms="${R[$run,ack_ms]}" 'BEGIN { printf "%.1f", 1000 / ms }')
        R[$run,claim_ms]=$(awk '/statement latencies/{on=1; next} on && /pop_list/ {print $1; exit}' "$OUT/$run.claim.pgbench")
        if [ "${R[$run,popack_cpu]}" != n/a ] && [ "${R[$run,claim_cpu]}" != n/a ]; then
            R[$run,ack_cpu]=$((R[$run,popack_cpu] - R[$run,claim_cpu]))
        else
            R[$run,ack_cpu]=n/a
        fi
        R[$run,ack_wal]=$(awk -v a="${R[$run,popack_wal]}" -v b="${R[$run,claim_wal]}" 'BEGIN { printf "%.2f", a - b }')
    done
done

{
    echo "A: $BIN_A (sha256 $(sha256sum "$BIN_A" | cut -c1-12))"
    echo "B: $BIN_B (sha256 $(sha256sum "$BIN_B" | cut -c1-12))"
    echo "pgbench -n -c 1 -T $T -M prepared, one session per cell, runs in column order; load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
    echo
    printf '| call | metric |'
    for r in "${runs[@]}"; do printf ' %s |' "$r"; done
    printf '\n|---|---|'
    for r in "${runs[@]}"; do printf -- '---|'; done
    printf '\n'
    row() { # row CALL METRIC KEY
        printf '| %s | %s |' "$1" "$2"
        for r in "${runs[@]}"; do printf ' %s |' "${R[$r,$3]}"; done
        printf '\n'
    }
    row "push 1 message" "tps" push_tps
    row "" "backend CPU µs/call" push_cpu
    row "" "WAL records/call" push_wal
    row "claim, finds 1 (auto-ack)" "tps" claim_tps
    row "" "latency ms (pgbench -r)" claim_ms
    row "" "backend CPU µs/call" claim_cpu
    row "" "WAL records/call" claim_wal
    row "claim, finds nothing" "tps" empty_tps
    row "" "backend CPU µs/call" empty_cpu
    row "" "WAL records/call" empty_wal
    row "leasing claim + ack (2 transactions)" "tps" popack_tps
    row "" "backend CPU µs/call" popack_cpu
    row "" "WAL records/call" popack_wal
    row "ack 1 message" "calls/s (1000 / latency)" ack_tps
    row "" "latency ms (pgbench -r)" ack_ms
    row "" "backend CPU µs/call (claim + ack − claim)" ack_cpu
    row "" "WAL records/call (claim + ack − claim)" ack_wal
} | tee "$OUT/table.md"
echo "results: $OUT" >&2
