#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { EncoderClient } from '../client/encoder-client';
import { MMError } from '../common/errors/mm-error';
import { formatReport, loadImages, progressLine, runLoad, type LoadOptions } from './load';

const USAGE = `usage: epd <command> [<req_id>] [options]

commands:
  publish <req_id> --len N --dim D [--bytes-per-value 4] [--part-idx I]
  publish <req_id> --error "message"
  wait    <req_id> [--timeout-ms MS] [--retries N] [--part-idx I]
  has     <req_id>
  release <req_id>
  load    (--concurrency C | --rate R) [--duration S] [--images DIR|generated]
          [--generated N] [--repeat-ratio F] [--timeout-ms MS] [--max-in-flight N] [--json]
          encodes (and releases) images for S seconds (default 10): a progress line on
          stderr, then p50/p90/p99, throughput and errors by type (--json: one object)

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
      concurrency: { type: 'string' },
      rate: { type: 'string' },
      duration: { type: 'string', default: '10' },
      images: { type: 'string', default: 'generated' },
      generated: { type: 'string', default: '16' },
      'repeat-ratio': { type: 'string', default: '0' },
      'max-in-flight': { type: 'string', default: '1024' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, reqId] = positionals;
  if (values.help || !command) throw new UsageError('missing command');
  if (command === 'load') return load(values);
  if (!reqId) throw new UsageError(`${command} needs a req_id`);

  const client = await connectClient();
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

function connectClient(): Promise<EncoderClient> {
  return EncoderClient.connect({
    servers: (process.env.EPD_NATS_URL ?? 'nats://127.0.0.1:4222').split(','),
    subjectPrefix: process.env.EPD_SUBJECT_PREFIX ?? 'epd',
    connectOptions: { timeout: 5000 },
  });
}

function positive(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} must be a positive number`);
  return n;
}

async function load(values: Record<string, string | boolean | undefined>): Promise<number> {
  const str = (k: string) => values[k] as string | undefined;
  const concurrency = int(str('concurrency'), 'concurrency');
  const rate = positive(str('rate'), 'rate');
  if ((concurrency === undefined) === (rate === undefined) || concurrency === 0) {
    throw new UsageError('load needs one of --concurrency C (> 0) or --rate R');
  }
  const repeatRatio = Number(str('repeat-ratio'));
  if (!(repeatRatio >= 0 && repeatRatio <= 1))
    throw new UsageError('--repeat-ratio must be in [0, 1]');
  const options: LoadOptions = {
    concurrency,
    rate,
    durationS: positive(str('duration'), 'duration')!,
    imagesDir: str('images') === 'generated' ? undefined : str('images'),
    generated: int(str('generated'), 'generated') || 16,
    repeatRatio,
    timeoutMs: int(str('timeout-ms'), 'timeout-ms') ?? 30_000,
    maxInFlight: int(str('max-in-flight'), 'max-in-flight') || 1024,
  };
  const images = await loadImages(options.imagesDir, options.generated);
  const client = await connectClient();
  const bar = !values.json && process.stderr.isTTY;
  try {
    const report = await runLoad(
      client,
      images,
      options,
      bar ? (p) => process.stderr.write(progressLine(p, options.durationS)) : undefined,
    );
    if (bar) process.stderr.write('\n');
    process.stdout.write(`${values.json ? JSON.stringify(report) : formatReport(report)}\n`);
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
