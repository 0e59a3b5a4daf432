import type { NatsServer } from './nats-server';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __EPD_NATS__?: NatsServer }).__EPD_NATS__?.dispose();
}
