# syntax=docker/dockerfile:1
# epd-encoder: build, then a slim runtime that runs as the unprivileged `node` user.
#   docker build -t epd-encoder .
#   docker run -p 30000:30000 -e EPD_NATS_URL=nats://nats:4222 \
#     -v /srv/towers:/models:ro -e EPD_MODEL_PATH=/models/vision-encoder.onnx \
#     -e EPD_AUDIO_MODEL_PATH=/models/audio-encoder.onnx epd-encoder
# The image carries the generated stand-in models (random weights) for demos only: run
# without a mounted model it exits 78 ("refusing to serve a generated reference model")
# unless -e EPD_ALLOW_REFERENCE_MODEL=true. How to export a real tower: docs/models.md.
# Node 22 (LTS, supported until 2027-04-30; test/deploy.e2e-spec.ts refuses a base past its
# end of life). The service and its tests run on Node 20.19+ on this project's machines,
# which cannot run Node 22: the native modules are N-API (ABI-stable across versions).
# Not built in this repository's CI (no base image is reachable there); its file tree is
# (test/image-tree.e2e-spec.ts); see docs/operations.md, Deployment.

# --- build: compile TypeScript and generate the reference ONNX models (fixed seed) ----
FROM node:22.21-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# onnxruntime-node's CPU binaries ship in the package; its install script (denied by
# allowScripts on npm >= 11.16) would only download CUDA ones.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY config ./config
COPY src ./src
RUN npx nest build -p tsconfig.build.json && node dist/cli/generate-models.js

# --- production dependencies only -----------------------------------------------------
FROM node:22.21-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=dev --no-audit --no-fund \
  && npm cache clean --force

# --- runtime ---------------------------------------------------------------------------
FROM node:22.21-bookworm-slim AS runtime
ENV NODE_ENV=production \
    EPD_HTTP_HOST=0.0.0.0 \
    EPD_LOG_FORMAT=json \
    MALLOC_ARENA_MAX=2
WORKDIR /app
COPY package.json ./
COPY config ./config
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/models ./models
# Files stay root-owned and read-only to the service.
USER node
EXPOSE 30000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.EPD_HTTP_PORT||30000}/health/live`).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The V8 flags of src/common/node-flags.ts (SERVICE_NODE_FLAGS): see there for why.
CMD ["node", "--max-semi-space-size=64", "dist/main.js"]
