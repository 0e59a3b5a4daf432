/**
 * Baseline for the wait_metadata benchmark: a bare nats.js responder in its own process
 * that answers every request on a subject with a fixed reply of a given size.
 * usage: raw-responder <nats-url> <subject> <reply-json>
 */
import { connect } from '@nats-io/transport-node';

async function main() {
  const [url, subject, reply] = process.argv.slice(2);
  if (!url || !subject || !reply)
    throw new Error('usage: raw-responder <nats-url> <subject> <reply-json>');
  const nc = await connect({ servers: url });
  const payload = new TextEncoder().encode(reply);
  nc.subscribe(subject, { queue: 'raw', callback: (_err, msg) => void msg.respond(payload) });
  await nc.flush();
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => void nc.drain().then(() => process.exit(0)));
}

void main();
