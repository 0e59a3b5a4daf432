import { NatsServer } from './nats-server';

/** One shared nats-server for the e2e suite; tests that stop NATS start their own. */
export default async function globalSetup(): Promise<void> {
  const server = await NatsServer.start({ maxPayload: 4 * 1024 * 1024 });
  process.env.EPD_TEST_NATS_URL = server.url;
  (globalThis as { __EPD_NATS__?: NatsServer }).__EPD_NATS__ = server;
}
