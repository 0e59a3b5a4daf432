import { rmSync } from 'node:fs';
import type { NatsServer } from './nats-server';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __EPD_NATS__?: NatsServer }).__EPD_NATS__?.dispose();
  const state = process.env.XDG_STATE_HOME;
  if (state?.includes('epd-test-state-')) rmSync(state, { recursive: true, force: true });
}
