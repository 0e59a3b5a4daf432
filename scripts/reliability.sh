#!/usr/bin/env bash
# The reliability suite at full size: 10,000 fuzz inputs, a 20,000-encode / 100,000-wait
# soak, and every fault-injection suite; writes docs/reliability.md. About 11 minutes here (its
# 42 suites took 501 s at ffd512b; the rest is jest starting each one, and the set-up).
# usage: npm run test:reliability
source "$(dirname "$0")/lib.sh"

ensure_test_dependencies
compile_bench

out="$(mktemp -d)"
status=0
EPD_FUZZ_RUNS="${EPD_FUZZ_RUNS:-10000}" \
EPD_SOAK_ENCODES="${EPD_SOAK_ENCODES:-20000}" \
EPD_SOAK_WAITS="${EPD_SOAK_WAITS:-100000}" \
EPD_RELIABILITY_OUT="$out" \
  npx --no-install jest --selectProjects e2e --runInBand --json --outputFile="$out/jest.json" \
    --testPathPatterns 'test/(fuzz|soak|overload|hardening-media|hardening-memory|hardening-inputs|shutdown|worker-shutdown|registry-jetstream|nats-restart|registry-shared|multi-instance|dp-workers|cache-cluster|delivery|nats-auth|nats-creds|destinations|restart-honesty|fused-retry|model-input-parcel|pool-after-close|worker-load-abort|staging-slab|zmq-socket-exhaustion|zmq-handshake|receipts|kv-bucket-deleted|memory-budget|tenants|object-store|registry-burst|call-ledger|roster-poison|work-budget-leak|scaling-inputs|run-ends-on-failure|takeover|http-body-budget|buckets-deleted)\.e2e-spec\.ts' \
  || status=$?
node dist-bench/scripts/reliability-report.js "$out" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
rm -rf "$out"
exit "$status"
