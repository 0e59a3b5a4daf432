/** The e2e suite's shared nats-server (started by globalSetup). */
export function sharedNatsUrl(): string {
  const url = process.env.EPD_TEST_NATS_URL;
  if (!url)
    throw new Error('EPD_TEST_NATS_URL is not set: run e2e tests through jest (globalSetup)');
  return url;
}

/** A unique subject prefix per app, so tests sharing one nats-server never cross-talk. */
let prefixSeq = 0;
export function uniquePrefix(): string {
  return `t${process.pid}x${++prefixSeq}x${Math.random().toString(36).slice(2, 8)}`;
}
