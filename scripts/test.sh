#!/usr/bin/env bash
# Installs what is missing and runs the whole suite: format, lint, typecheck, unit and
# property tests, then e2e tests against real nats-servers that the harness starts on
# free loopback ports and stops by PID.
source "$(dirname "$0")/lib.sh"

ensure_test_dependencies
npm run --silent check
