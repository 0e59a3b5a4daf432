import { mkdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ReferenceReceiver } from '../transfer/reference-receiver';

const USAGE = `usage: epd-receiver [--host 127.0.0.1] [--port 0] [--out DIR]

The reference receiver: a stand-in for a prefill/decode scheduler. It accepts the
encoder's data-plane frames (docs/contract.md §5), checks byte_length against shape and
dtype, acks each frame, prints one JSON line per frame, and with --out writes each
embedding to DIR/<req_id>.part<part_idx>.npy. Ctrl-C stops it.`;

/** Runs the reference receiver until SIGINT/SIGTERM (`epd receive`, `epd-receiver`). */
export async function runReceiver(o: { host: string; port: number; out?: string }): Promise<void> {
  if (o.out) mkdirSync(o.out, { recursive: true });
  const receiver = await ReferenceReceiver.start({
    host: o.host,
    port: o.port,
    outputDir: o.out,
    onFrame: ({ header, data, from }) => {
      const { req_id, part_idx, shape, dtype, error_msg } = header;
      process.stdout.write(
        `${JSON.stringify({ req_id, part_idx, shape, dtype, bytes: data.length, from, error_msg })}\n`,
      );
    },
  });
  process.stderr.write(
    `epd receive: listening on ${receiver.endpoint}${o.out ? `, writing .npy to ${o.out}` : ''}\n`,
  );
  const stop = () => void receiver.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '0' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  await runReceiver({ host: values.host, port: Number(values.port), out: values.out });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`epd-receiver: ${(err as Error).message}\n`);
    process.exit(1);
  });
}
