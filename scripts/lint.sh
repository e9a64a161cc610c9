#!/usr/bin/env bash
# lint.sh — gofmt (fails on any unformatted file), go vet, staticcheck.
set -euo pipefail
cd "$(dirname "$0")/.."
gobin="$(go env GOBIN)"
export PATH="$PATH:${gobin:-$(go env GOPATH)/bin}"

echo "== gofmt -l"
unformatted="$(find . -name '*.go' -not -path './.git/*' -not -path './.pgquectl/*' -print0 | xargs -0 gofmt -l)"
if [ -n "$unformatted" ]; then
    echo "these files need gofmt -w:" >&2
    echo "$unformatted" >&2
    exit 1
fi
echo "== go vet ./..."
go vet ./...
echo "== staticcheck ./..."
staticcheck ./...
