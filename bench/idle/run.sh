#!/usr/bin/env bash
# bench/idle/run.sh - what an idle `pgquectl dev` costs: CPU of the
# PostgreSQL processes and of `pgquectl serve` over a window in which there
# is nothing to deliver (README.md beside this file).
set -euo pipefail

usage() {
	cat <<'USAGE'
usage: bench/idle/run.sh [--pgquectl BIN] [--state-dir DIR] [--port N]
                         [--duration S] [--settle S] [--queues N] [--consumers N]
                         [--no-cron] [--keep]
  --pgquectl BIN   the binary under test (default: pgquectl on PATH); its
                   embedded engine is the one installed
  --state-dir DIR  dev state directory, created fresh (default: $TMPDIR/idle-bench)
  --port N         the broker's port on 127.0.0.1 (default 16632)
  --duration S     the measured window (default 60)
  --settle S       wait after set-up and before the window (default 10)
  --queues N       queues created (one message pushed and drained each; default 10)
  --consumers N    parked long-polling consumers (curl loops, default 2)
  --no-cron        no pg_cron ticking (pgquectl tick --off): serve's standby
                   ticker ticks at its --standby-tick-period
  --keep           leave the cluster and broker running (default: destroy)
USAGE
}

bin=pgquectl
state=${TMPDIR:-/tmp}/idle-bench
port=16632
duration=60
settle=10
nqueues=10
nconsumers=2
cron=1
keep=0
while [ $# -gt 0 ]; do
	case $1 in
	--pgquectl) bin=$2; shift 2 ;;
	--state-dir) state=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--settle) settle=$2; shift 2 ;;
	--queues) nqueues=$2; shift 2 ;;
	--consumers) nconsumers=$2; shift 2 ;;
	--no-cron) cron=0; shift ;;
	--keep) keep=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
done
bin=$(command -v "$bin") || { echo "run.sh: no pgquectl binary (pass --pgquectl BIN)" >&2; exit 2; }
url=http://127.0.0.1:$port
consumers=()

cleanup() {
	for c in "${consumers[@]}"; do kill "$c" 2>/dev/null || true; done
	if [ "$keep" = 0 ]; then
		"$bin" dev destroy --state-dir "$state" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

# A fresh cluster: the binary's engine, pg_cron's 100 Hz loop, the broker.
"$bin" dev destroy --state-dir "$state" >/dev/null 2>&1 || true
"$bin" dev --state-dir "$state" --fast --broker-listen "127.0.0.1:$port" >"$state.setup.log" 2>&1 ||
	{ cat "$state.setup.log" >&2; exit 1; }
dsn=$("$bin" dev dsn --state-dir "$state")
export PGQUE_DSN=$dsn
if [ "$cron" = 0 ]; then
	"$bin" tick --off >>"$state.setup.log" 2>&1
fi

# Queues: one message pushed to each and popped (auto-ack), so each has a
# partition, a consumer cursor and ticks behind it.
for i in $(seq -w 1 "$nqueues"); do
	curl -sSf "$url/api/v1/push" -H 'content-type: application/json' \
		-d "{\"items\":[{\"queue\":\"idle$i\",\"payload\":{\"n\":$((10#$i))}}]}" >/dev/null
done
for i in $(seq -w 1 "$nqueues"); do
	n=$(curl -sSf "$url/api/v1/pop/queue/idle$i?autoAck=true&wait=true&timeout=5000" | grep -o '"transactionId"' | wc -l)
	[ "$n" = 1 ] || { echo "run.sh: queue idle$i: popped $n messages, want 1" >&2; exit 1; }
done

# Parked consumers: long polls that find nothing, repeated.
for c in $(seq 1 "$nconsumers"); do
	q=idle$(printf %0${#nqueues}d "$(( (c - 1) % nqueues + 1 ))")
	( while :; do curl -s -m 40 "$url/api/v1/pop/queue/$q?wait=true&timeout=30000" >/dev/null || sleep 1; done ) &
	consumers+=($!)
done

if [ "$cron" = 1 ]; then
	# pg_cron starts the loop at the next minute: wait for its backend.
	for _ in $(seq 1 75); do
		[ "$(psql "$dsn" -Atc "SELECT count(*) FROM pg_stat_activity WHERE query = 'CALL pgque.ticker_loop()'")" -gt 0 ] && break
		sleep 1
	done
fi
sleep "$settle"

pm=$(head -1 "$state/data/postmaster.pid")
serve=$(head -1 "$state/broker.pid")
# application_name of each backend, read before and after the window (not
# during it: a psql there would be measured).
apps=$state.apps
psql "$dsn" -AtF '|' -c "SELECT pid, coalesce(nullif(application_name, ''), backend_type) FROM pg_stat_activity" >"$apps"
samples=$state.samples
: >"$samples"
hz=$(getconf CLK_TCK)
end=$(( $(date +%s%N) + duration * 1000000000 ))
t0=$(date +%s%N)
# Every 0.5 s: pid, kind hint (its process title), utime + stime. A backend
# that exits between two samples loses at most that half second.
while :; do
	now=$(date +%s%N)
	for p in "$serve" "$pm" $(pgrep -P "$pm"); do
		st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		title=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) || continue
		set -- ${st##*) }
		echo "$now|$p|$(( ${12} + ${13} ))|$title" >>"$samples"
	done
	[ "$now" -ge "$end" ] && break
	sleep 0.5
done
t1=$(date +%s%N)
psql "$dsn" -AtF '|' -c "SELECT pid, coalesce(nullif(application_name, ''), backend_type) FROM pg_stat_activity" >>"$apps"

echo "pgquectl: $bin ($("$bin" version 2>/dev/null | head -1))"
echo "ticking: $([ "$cron" = 1 ] && echo 'pg_cron ticker_loop (100 Hz), serve standby deferring' || echo 'no pg_cron loop: serve standby ticker')"
echo "queues: $nqueues, parked consumers: $nconsumers, window: $(( (t1 - t0) / 1000000 )) ms"
awk -F'|' -v hz="$hz" -v secs="$(( (t1 - t0) / 1000000 ))" -v serve="$serve" -v pm="$pm" -v apps="$apps" '
	BEGIN {
		while ((getline line < apps) > 0) { split(line, a, "|"); app[a[1]] = a[2] }
	}
	NR == 1 { t0 = $1 }
	{
		t = $1; p = $2; v = $3; title = $4
		if (!(p in first)) { first[p] = (t == t0) ? v : 0 }
		last[p] = v
		if (title ~ / CALL/) loop[p] = 1
		if (!(p in kind)) {
			if (p == serve) kind[p] = "serve process"
			else if (p == pm) kind[p] = "postmaster"
			else if (title ~ /^postgres: (checkpointer|background writer|walwriter|autovacuum|logical replication|pg_cron launcher|stats)/) {
				k = title; sub(/^postgres: /, "", k); sub(/ +$/, "", k); sub(/ worker.*/, " worker", k); kind[p] = "bg: " k
			}
			else if (app[p] == "pgquectl serve ticker") kind[p] = "serve standby ticker conn"
			else if (app[p] == "pgquectl serve") kind[p] = "serve pool conns"
			else kind[p] = "other backend"
		}
	}
	END {
		for (p in last) {
			k = (p in loop) ? "pg_cron loop backend(s)" : kind[p]
			d = last[p] - first[p]; sum[k] += d; n[k]++; tot += d
		}
		printf "%-34s %6s %8s %8s\n", "process kind", "procs", "cpu ms", "% core"
		for (k in sum) printf "%-34s %6d %8d %8.2f\n", k, n[k], sum[k] * 1000 / hz, sum[k] * 100 / hz / (secs / 1000) | "sort"
		close("sort")
		printf "%-34s %6s %8d %8.2f\n", "TOTAL (postgres + serve)", "", tot * 1000 / hz, tot * 100 / hz / (secs / 1000)
	}' "$samples"
