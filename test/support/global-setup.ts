import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureReferenceModels, writeVisionModel } from '../../src/cli/models/generate-models';
import { projectRoot } from '../../src/common/fs/project-root';
import { NatsServer } from './nats-server';

/** One shared nats-server for the e2e suite; tests that stop NATS start their own. */
export default async function globalSetup(): Promise<void> {
  ensureReferenceModels();
  // Services write their restart ledgers (and default profile dirs) under XDG_STATE_HOME:
  // here, not in the home directory of whoever runs the suite.
  process.env.XDG_STATE_HOME = mkdtempSync(join(tmpdir(), 'epd-test-state-'));
  // A 4096-wide vision model, for tests that need a forward that outlasts preprocessing.
  process.env.EPD_TEST_SLOW_MODEL = writeVisionModel(join(projectRoot(), 'models', 'test'), 4096);
  const server = await NatsServer.start({ maxPayload: 4 * 1024 * 1024 });
  process.env.EPD_TEST_NATS_URL = server.url;
  (globalThis as { __EPD_NATS__?: NatsServer }).__EPD_NATS__ = server;
}
