#!/usr/bin/env node
import { parseArgs } from 'node:util';
import type { EncoderClient } from '../client/encoder-client';
import { MMError } from '../common/errors/mm-error';
import { ConfigError } from '../config/config.loader';
import type { AppConfig } from '../config/app-config';
import type { Snapshot } from '../metrics/dashboard/dashboard.service';
import { adminGet, cliConfig, connectClient } from './cli-config';
import { encodeCommand, UsageError } from './encode-command';
import { formatReport, loadImages, progressLine, runLoad, type LoadOptions } from './load';
import { runReceiver } from './receiver';
import { formatStatus } from './status-command';

const USAGE = `usage: epd <command> [arguments] [options]

commands:
  encode  <file|url>... [--modality image|video|audio] [--req-id ID] [--send host:port]
          [--wait] [--keep] [--timeout-ms MS]
          encodes the files or URLs as one request and prints the reply; --wait also
          waits for its metadata as a receiver does (metadata_after_ms); --send delivers
          the embedding to a receiver (epd receive); released afterwards unless --keep
  wait    <req_id> [--timeout-ms MS] [--retries N] [--part-idx I]
  status  [--json]
          registry, staging, queue, waits, encodes, ranks and instances (GET /admin/status)
  receive [--host 127.0.0.1] [--port 0] [--out DIR]
          the reference receiver: acks each embedding frame, prints one JSON line per
          frame, and with --out writes DIR/<req_id>.part<part_idx>.npy
  load    (--concurrency C | --rate R) [--duration S] [--images DIR|generated]
          [--generated N] [--repeat-ratio F] [--timeout-ms MS] [--max-in-flight N] [--json]
          encodes (and releases) images for S seconds (default 10): a progress bar on
          stderr, then p50/p90/p99, throughput and errors by type (--json: one object)
  publish <req_id> --len N --dim D [--bytes-per-value 4] [--part-idx I]
  publish <req_id> --error "message"
  has     <req_id>
  release <req_id>

Configuration: the service's own (config/*.yaml, EPD_CONFIG, EPD_* variables): NATS from
EPD_NATS_URL, EPD_SUBJECT_PREFIX and the EPD_NATS_* credentials; status from
EPD_HTTP_HOST, EPD_HTTP_PORT and EPD_ADMIN_TOKEN.
Exit status: 0 on success, 1 on an error reply (printed as JSON on stderr), 2 on bad
usage, 78 on a bad configuration.`;

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
      modality: { type: 'string' },
      'req-id': { type: 'string' },
      send: { type: 'string' },
      wait: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '0' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, reqId] = positionals;
  if (values.help) {
    // Asked for: the usage on stdout, and success.
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (!command) throw new UsageError('missing command');
  if (command === 'receive') {
    await runReceiver({ host: values.host, port: int(values.port, 'port')!, out: values.out });
    return new Promise<number>(() => undefined); // until SIGINT/SIGTERM
  }
  const config = cliConfig();
  if (command === 'status') {
    const snapshot = await adminGet<Snapshot>(config, '/admin/status');
    process.stdout.write(`${values.json ? JSON.stringify(snapshot) : formatStatus(snapshot)}\n`);
    return 0;
  }
  if (command === 'load') return load(config, values);
  if (command === 'encode') {
    if (positionals.length < 2) throw new UsageError('encode needs at least one file or URL');
    return withClient(config, async (client) => {
      out(
        await encodeCommand(client, {
          items: positionals.slice(1),
          modality: values.modality,
          reqId: values['req-id'],
          send: values.send,
          wait: values.wait,
          keep: values.keep,
          timeoutMs: int(values['timeout-ms'], 'timeout-ms'),
        }),
      );
      return 0;
    });
  }
  if (!reqId) throw new UsageError(`${command} needs a req_id`);
  return withClient(config, (client) => reqCommand(client, command, reqId, values));
}

async function withClient(
  config: AppConfig,
  fn: (client: EncoderClient) => Promise<number>,
): Promise<number> {
  const client = await connectClient(config);
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

async function reqCommand(
  client: EncoderClient,
  command: string,
  reqId: string,
  values: Record<string, string | boolean | undefined>,
): Promise<number> {
  const str = (k: string) => values[k] as string | undefined;
  const partIdx = int(str('part-idx'), 'part-idx');
  switch (command) {
    case 'publish': {
      const error = str('error');
      if (error) {
        await client.publishMetadata(reqId, { error }, { partIdx });
      } else {
        const len = int(str('len'), 'len');
        const dim = int(str('dim'), 'dim');
        if (len === undefined || !dim)
          throw new UsageError('publish needs --len and --dim (or --error)');
        const size = len * dim * (int(str('bytes-per-value'), 'bytes-per-value') ?? 4);
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
          timeoutMs: int(str('timeout-ms'), 'timeout-ms'),
          retries: int(str('retries'), 'retries'),
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
}

function positive(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} must be a positive number`);
  return n;
}

async function load(
  config: AppConfig,
  values: Record<string, string | boolean | undefined>,
): Promise<number> {
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
  const client = await connectClient(config);
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
    if (err instanceof ConfigError) {
      process.stderr.write(`epd: ${err.message}\n`);
      process.exit(78);
    }
    const body =
      err instanceof MMError
        ? { status: 'error', code: err.code, message: err.message, req_id: err.reqId ?? null }
        : { status: 'error', code: 500, message: (err as Error).message, req_id: null };
    process.stderr.write(`${JSON.stringify(body)}\n`);
    process.exit(1);
  },
);
