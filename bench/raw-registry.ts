/**
 * Baseline for the registry-burst benchmark: the same job as the service's metadata
 * registry done by bare nats.js in its own process. `<subject-prefix>.wait_metadata`
 * parks the caller's reply subject under its req_id until `<subject-prefix>.publish_metadata`
 * names it; the publish is answered null and each parked caller gets the metadata with
 * its req_id, in the service's reply shape. No validation, no deadline, no framework.
 * usage: raw-registry <nats-url> <subject-prefix>
 */
import { connect, type Msg } from '@nats-io/transport-node';

async function main() {
  const [url, prefix] = process.argv.slice(2);
  if (!url || !prefix) throw new Error('usage: raw-registry <nats-url> <subject-prefix>');
  const nc = await connect({ servers: url });
  const published = new Map<string, string>();
  const waiting = new Map<string, Msg[]>();
  const reply = (reqId: string, metadata: object) =>
    JSON.stringify({ id: 'raw', response: { ...metadata, req_id: reqId, part_idx: 0 } });
  nc.subscribe(`${prefix}.wait_metadata`, {
    queue: 'raw',
    callback: (_err, msg) => {
      const { req_id: reqId } = msg.json<{ req_id: string }>();
      const done = published.get(reqId);
      if (done) return void msg.respond(done);
      const list = waiting.get(reqId);
      if (list) list.push(msg);
      else waiting.set(reqId, [msg]);
    },
  });
  nc.subscribe(`${prefix}.publish_metadata`, {
    queue: 'raw',
    callback: (_err, msg) => {
      const { req_id: reqId, metadata } = msg.json<{ req_id: string; metadata: object }>();
      const answer = reply(reqId, metadata);
      published.set(reqId, answer);
      for (const w of waiting.get(reqId) ?? []) w.respond(answer);
      waiting.delete(reqId);
      msg.respond('{"id":"raw","response":null}');
    },
  });
  await nc.flush();
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => void nc.drain().then(() => process.exit(0)));
}

void main();
