# Shared helpers for start.sh, test.sh and bench.sh. Source it; do not run it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '[epd] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    log "need root (or sudo) to run: $*"; return 1; fi
}

# nats-server from Debian (2.9.x, has JetStream). Installed only when missing.
ensure_nats_server() {
  if command -v nats-server >/dev/null 2>&1; then return 0; fi
  log "installing nats-server (Debian package)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nats-server >/dev/null
  command -v nats-server >/dev/null || { log "nats-server did not install"; return 1; }
}

# openssl, for the test that makes a CA and a server certificate for NATS over TLS.
ensure_openssl() {
  if command -v openssl >/dev/null 2>&1; then return 0; fi
  log "installing openssl (Debian package)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq openssl >/dev/null
}

# Debian's b3sum: the vLLM mm_hash test computes blake3 with it, independently of the service.
ensure_b3sum() {
  if command -v b3sum >/dev/null 2>&1; then return 0; fi
  log "installing b3sum (Debian package)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq b3sum >/dev/null
}

# Debian's python3, for tests that check us against independent implementations: numpy
# (.npy files, bfloat16), Pillow (the Qwen2-VL reference processor) and pyzmq (the
# SGLang-wire interop receiver). Found with `command -p` (the python3 first on PATH may be
# another build without them); PyPI is not reachable, the Debian packages are.
ensure_python_packages() {
  local py
  py="$(command -p -v python3 || true)"
  if [ -n "$py" ] && "$py" -c 'import numpy, zmq, PIL' 2>/dev/null; then return 0; fi
  log "installing python3-numpy, python3-zmq and python3-pil (Debian packages)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq python3 python3-numpy python3-zmq python3-pil >/dev/null
}

# Debian's chromium, for the dashboard test (driven by puppeteer-core; no browser download).
ensure_chromium() {
  if command -v chromium >/dev/null 2>&1 || [ -n "${EPD_CHROMIUM:-}" ]; then return 0; fi
  log "installing chromium (Debian package, for the dashboard test)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
}

# Everything the tests need: nats-server, the Python reference packages, openssl,
# chromium, node modules, the build and the reference models.
ensure_test_dependencies() {
  ensure_nats_server
  ensure_python_packages
  ensure_openssl
  ensure_b3sum
  ensure_chromium
  ensure_node_modules
  ensure_build
}

# npm ci when node_modules is missing or older than the lockfile. Install scripts follow
# package.json's allowScripts (npm >= 11.16; npm 12 blocks unlisted ones): zeromq's and
# @swc/core's only check their prebuilt binaries; onnxruntime-node's would download CUDA
# binaries (its CPU ones ship in the package) and is denied, with protobufjs' version
# check, @scarf/scarf's install telemetry and @parcel/watcher's node-gyp build (jest's
# watch mode only). ONNXRUNTIME_NODE_INSTALL=skip, onnxruntime-node's documented switch,
# covers an npm older than allowScripts; set here, not in .npmrc, where npm 11 warns
# about an unknown config key on every command.
ensure_node_modules() {
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "installing npm dependencies (npm ci)"
    ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error
  fi
}

# Builds unless dist/ is newer than every source it is built from.
ensure_build() {
  if [ -f dist/main.js ] && [ -z "$(find src config tsconfig.json tsconfig.build.json nest-cli.json .swcrc package-lock.json -newer dist/main.js -print -quit 2>/dev/null)" ]; then
    log "build is up to date"
  else
    log "building"
    npx --no-install nest build -p tsconfig.build.json
    touch dist/main.js
  fi
  # Reference ONNX models, generated from a fixed seed (no download), unless present.
  node dist/cli/generate-models.js
}

# The benchmarks and scripts, compiled by tsc into dist-bench/, with the assets nest build
# copies into dist/ (the resampler's kernels): tsc copies none.
compile_bench() {
  npx --no-install tsc -p tsconfig.bench.json
  mkdir -p dist-bench/src/encoder/preprocess
  cp src/encoder/preprocess/*.wasm dist-bench/src/encoder/preprocess/
}

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Starts nats-server with JetStream on a free loopback port and a temp store dir.
# Sets NATS_PID, NATS_DIR and EPD_NATS_URL. Stop it with stop_nats (by PID).
start_nats() {
  local port
  port="$(free_port)"
  NATS_DIR="$(mktemp -d -t epd-nats.XXXXXX)"
  nats-server -a 127.0.0.1 -p "$port" -js -sd "$NATS_DIR/js" >"$NATS_DIR/nats.log" 2>&1 &
  NATS_PID=$!
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      export EPD_NATS_URL="nats://127.0.0.1:$port"
      log "nats-server pid $NATS_PID on $EPD_NATS_URL (store $NATS_DIR/js)"
      return 0
    fi
    kill -0 "$NATS_PID" 2>/dev/null || break
    sleep 0.1
  done
  log "nats-server did not start:"; cat "$NATS_DIR/nats.log" >&2; return 1
}

stop_nats() {
  if [ -n "${NATS_PID:-}" ] && kill -0 "$NATS_PID" 2>/dev/null; then
    kill "$NATS_PID" 2>/dev/null || true
    wait "$NATS_PID" 2>/dev/null || true
  fi
  [ -n "${NATS_DIR:-}" ] && rm -rf "$NATS_DIR"
  NATS_PID=""
}
