#!/usr/bin/env bash
# What this machine can run inference on, and how fast: prints the ONNX Runtime execution
# providers onnxruntime-node can use here (installed, for those it does not bundle), then
# runs the encode benchmarks once per provider, service and in-process baselines alike on
# that provider (EPD_ORT_EXECUTION_PROVIDERS), writing results like every benchmark does,
# under bench/results/device/<provider>/. A provider whose run fails is reported and the
# next one runs. On a machine with a GPU it needs no change: install the provider first
# (docs/models.md, Execution providers).
# usage: bash scripts/device-check.sh [--quick]
source "$(dirname "$0")/lib.sh"

ensure_nats_server
ensure_node_modules
ensure_build
compile_bench

providers="$(node -e 'console.log(require("./dist/encoder/backend/execution-providers").availableExecutionProviders().join(" "))')"
log "execution providers available here: ${providers}"
node -e 'for (const b of require("onnxruntime-node").listSupportedBackends()) console.log(`  ${b.name}: ${b.bundled ? "bundled" : "installed separately"}`)'

failed=()
for p in $providers; do
  log "encode benchmarks on ${p}"
  for b in encode-cost encode-throughput; do
    if ! EPD_ORT_EXECUTION_PROVIDERS="$p" EPD_BENCH_RESULTS_SUBDIR="device/$p" \
      node "dist-bench/bench/$b.bench.js" "$@"; then
      log "${b} on ${p} failed"
      failed+=("$p/$b")
    fi
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  log "failed: ${failed[*]}"
  exit 1
fi
log "results in bench/results/${1:+quick/}device/<provider>/"
