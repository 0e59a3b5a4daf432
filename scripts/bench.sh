#!/usr/bin/env bash
# Runs every benchmark and writes JSON + markdown to bench/results/.
# usage: npm run bench [-- --quick]   (--quick finishes in under 2 minutes)
source "$(dirname "$0")/lib.sh"

ensure_nats_server
ensure_node_modules
ensure_build
log "compiling benchmarks"
compile_bench

mode=()
for arg in "$@"; do [ "$arg" = "--quick" ] && mode=(--quick); done

# Each benchmark, timed.
bench() {
  local t0=$SECONDS
  node "$@" "${mode[@]}"
  log "$(basename "${@: -1}" .js): $((SECONDS - t0)) s"
}
lane_a() {
  bench --expose-gc --max-old-space-size=8192 dist-bench/bench/registry-scaling.bench.js
  bench dist-bench/bench/wait-metadata.bench.js
  bench dist-bench/bench/registry-burst.bench.js
  bench dist-bench/bench/encode-throughput.bench.js
  bench dist-bench/bench/encode-cost.bench.js
  bench dist-bench/bench/send-throughput.bench.js
  bench dist-bench/bench/http-body.bench.js
}
lane_b() {
  bench dist-bench/bench/shared-metadata.bench.js
  bench dist-bench/bench/dp-workers.bench.js
  bench dist-bench/bench/embedding-cache.bench.js
  bench dist-bench/bench/overload.bench.js
}
# Faults on a NATS cluster: mostly waiting (a node down, a leader election), little CPU;
# then the object store tier's (there so that the three lanes take about as long).
lane_c() {
  bench dist-bench/bench/failover.bench.js
  bench dist-bench/bench/nats-client.bench.js
  bench dist-bench/bench/startup.bench.js
  bench dist-bench/bench/object-store.bench.js
  bench dist-bench/bench/vllm-ec.bench.js
  bench dist-bench/bench/multi-model.bench.js
}

if [ ${#mode[@]} -eq 0 ]; then
  # A measurement: one benchmark at a time, nothing else on the machine of ours.
  lane_a
  lane_b
  lane_c
else
  # A smoke test (it measures nothing): the lanes at once, so that it stays under two
  # minutes although most of it is services starting. Each lane's output is shown whole.
  logs="$(mktemp -d -t epd-bench-quick.XXXXXX)"
  (set -e; lane_a) >"$logs/a.log" 2>&1 &
  pid_a=$!
  (set -e; lane_b) >"$logs/b.log" 2>&1 &
  pid_b=$!
  (set -e; lane_c) >"$logs/c.log" 2>&1 &
  pid_c=$!
  status=0
  wait "$pid_a" || status=$?
  wait "$pid_b" || status=$?
  wait "$pid_c" || status=$?
  cat "$logs/a.log" "$logs/b.log" "$logs/c.log" >&2
  rm -rf "$logs"
  [ "$status" -eq 0 ] || { log "a quick benchmark failed (exit $status)"; exit "$status"; }
fi
node dist-bench/bench/targets.js "${mode[@]}"
log "results in bench/results/${mode[0]:+quick/}"
