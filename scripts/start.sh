#!/usr/bin/env bash
# Installs what is missing, builds, and runs the service in the foreground on its
# embedded defaults. Starts a local nats-server (JetStream, temp store, free port) unless
# EPD_NATS_URL is set. Ctrl-C stops both.
source "$(dirname "$0")/lib.sh"

ensure_node_modules
ensure_build

APP_PID=""
cleanup() {
  if [ -n "$APP_PID" ] && kill -0 "$APP_PID" 2>/dev/null; then kill -TERM "$APP_PID" 2>/dev/null || true; wait "$APP_PID" 2>/dev/null || true; fi
  stop_nats
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${EPD_NATS_URL:-}" ]; then
  ensure_nats_server
  start_nats
fi

# npm start serves the generated reference models unless EPD_MODEL_PATH names a real tower;
# it says so at start, and production (the image, deploy/) does not allow it.
export EPD_ALLOW_REFERENCE_MODEL="${EPD_ALLOW_REFERENCE_MODEL:-true}"

# The environment of src/common/node-flags.ts (SERVICE_ENV): see there for why.
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"

# The service prints a banner with its URLs once it is ready (on a terminal; its log
# lines carry the same otherwise).
# The V8 flags of src/common/node-flags.ts (SERVICE_NODE_FLAGS): see there for why.
node --max-semi-space-size=64 dist/main.js &
APP_PID=$!
wait "$APP_PID"
