#!/usr/bin/env bash
# Installs what is missing and runs the whole suite: format, lint, typecheck, unit and
# property tests, then e2e tests against real nats-servers that the harness starts on
# free loopback ports and stops by PID; then every benchmark once in --quick mode.
source "$(dirname "$0")/lib.sh"

ensure_test_dependencies
npm run --silent check
# Every benchmark once, small: a smoke test that they still run and write their results
# (to bench/results/quick/, ignored by git). No target is asserted here.
bash scripts/bench.sh --quick
