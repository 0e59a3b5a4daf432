#!/usr/bin/env bash
# Runs every benchmark and writes JSON + markdown to bench/results/.
# usage: npm run bench [-- --quick]   (--quick finishes in under 2 minutes)
source "$(dirname "$0")/lib.sh"

ensure_nats_server
ensure_node_modules
ensure_build
log "compiling benchmarks"
npx --no-install tsc -p tsconfig.bench.json

mode=()
for arg in "$@"; do [ "$arg" = "--quick" ] && mode=(--quick); done

node --expose-gc --max-old-space-size=8192 dist-bench/bench/registry-scaling.bench.js "${mode[@]}"
node dist-bench/bench/wait-metadata.bench.js "${mode[@]}"
node dist-bench/bench/encode-throughput.bench.js "${mode[@]}"
node dist-bench/bench/encode-cost.bench.js "${mode[@]}"
node dist-bench/bench/send-throughput.bench.js "${mode[@]}"
node dist-bench/bench/http-body.bench.js "${mode[@]}"
node dist-bench/bench/shared-metadata.bench.js "${mode[@]}"
node dist-bench/bench/dp-workers.bench.js "${mode[@]}"
node dist-bench/bench/embedding-cache.bench.js "${mode[@]}"
node dist-bench/bench/overload.bench.js "${mode[@]}"
log "results in bench/results/"
