# Thin wrappers around the scripts: the scripts are the source of truth.
.PHONY: build test lint setup dev clean

build:
	go build -o bin/pgquectl ./cmd/pgquectl

test:
	bash scripts/test.sh

lint:
	bash scripts/lint.sh

setup:
	bash scripts/setup.sh

dev:
	go run ./cmd/pgquectl dev

clean:
	rm -rf bin
