import { parseArgs } from 'node:util';
import { EncoderClient } from '../client/encoder-client';
import { MMError } from '../common/errors/mm-error';

const USAGE = `usage: epd <command> <req_id> [options]

commands:
  publish <req_id> --len N --dim D [--bytes-per-value 4] [--part-idx I]
  publish <req_id> --error "message"
  wait    <req_id> [--timeout-ms MS] [--retries N] [--part-idx I]
  has     <req_id>
  release <req_id>

NATS: EPD_NATS_URL (default nats://127.0.0.1:4222), EPD_SUBJECT_PREFIX (default epd).
Exit status: 0 on success, 1 on an error reply (printed as JSON on stderr), 2 on bad usage.`;

function out(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

function int(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new UsageError(`--${name} must be a non-negative integer`);
  return n;
}

class UsageError extends Error {}

async function run(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      len: { type: 'string' },
      dim: { type: 'string' },
      'bytes-per-value': { type: 'string', default: '4' },
      'part-idx': { type: 'string' },
      error: { type: 'string' },
      'timeout-ms': { type: 'string' },
      retries: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, reqId] = positionals;
  if (values.help || !command || !reqId) throw new UsageError('missing command or req_id');

  const client = await EncoderClient.connect({
    servers: (process.env.EPD_NATS_URL ?? 'nats://127.0.0.1:4222').split(','),
    subjectPrefix: process.env.EPD_SUBJECT_PREFIX ?? 'epd',
    connectOptions: { timeout: 5000 },
  });
  try {
    const partIdx = int(values['part-idx'], 'part-idx');
    switch (command) {
      case 'publish': {
        if (values.error) {
          await client.publishMetadata(reqId, { error: values.error }, { partIdx });
        } else {
          const len = int(values.len, 'len');
          const dim = int(values.dim, 'dim');
          if (len === undefined || !dim)
            throw new UsageError('publish needs --len and --dim (or --error)');
          const size = len * dim * (int(values['bytes-per-value'], 'bytes-per-value') ?? 4);
          await client.publishMetadata(
            reqId,
            { embedding_len: len, embedding_dim: dim, embedding_size: size },
            { partIdx },
          );
        }
        out({ req_id: reqId, published: true });
        break;
      }
      case 'wait':
        out(
          await client.waitMetadata(reqId, {
            timeoutMs: int(values['timeout-ms'], 'timeout-ms'),
            retries: int(values.retries, 'retries'),
            partIdx,
          }),
        );
        break;
      case 'has':
        out({ req_id: reqId, present: await client.hasMetadata(reqId) });
        break;
      case 'release':
        await client.release(reqId);
        out({ req_id: reqId, released: true });
        break;
      default:
        throw new UsageError(`unknown command ${command}`);
    }
    return 0;
  } finally {
    await client.close();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (
      err instanceof UsageError ||
      (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION'
    ) {
      process.stderr.write(`epd: ${(err as Error).message}\n${USAGE}\n`);
      process.exit(2);
    }
    const body =
      err instanceof MMError
        ? { status: 'error', code: err.code, message: err.message, req_id: err.reqId ?? null }
        : { status: 'error', code: 500, message: (err as Error).message, req_id: null };
    process.stderr.write(`${JSON.stringify(body)}\n`);
    process.exit(1);
  },
);
