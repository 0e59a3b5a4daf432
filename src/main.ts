import { redactUrls } from './common/redact';
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { configureApp, startApp } from './bootstrap';
import { ConfigError, loadConfig } from './config/config.loader';
import { CONTRACT_ERROR_PREFIX } from './encoder/backend/model-contract-check';
import { StartRefusedError } from './common/start-refused';
import { EncodeStages } from './encoder/pipeline/encode-stages.service';
import { BucketKeeper } from './jetstream/bucket-keeper';
import type { AppConfig } from './config/app-config';
import { dpRole } from './config/process-role';
import { shutdownBoundMs } from './config/shutdown-bound';
import { closeAndExit } from './logging/stop-on-signals';
import { startTracing } from './tracing/tracing';
import { setHeapGrowth } from './common/heap-growth';
import { missingServiceFlags } from './common/node-flags';

async function main(): Promise<void> {
  let loaded;
  try {
    loaded = loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`epd-encoder: ${err.message}\n`);
    process.exit(78); // EX_CONFIG
  }

  setHeapGrowth(loaded.config.encoder.heapGrowingPercent);

  // OTEL_* variables turn tracing on (off by default); started before the app so that the
  // context manager is in place for its first request.
  const role = dpRole(loaded.config);
  startTracing({
    attributes: {
      'service.instance.id': loaded.config.instance.id,
      'epd.role': role,
      ...(role === 'worker' ? { 'epd.dp_rank': loaded.config.encoder.dpRank } : {}),
    },
  });

  let app;
  try {
    app = await NestFactory.create(AppModule.withConfig(loaded.config), {
      bufferLogs: true,
      bodyParser: false,
      abortOnError: false, // errors reach the catch below instead of a bare exit
    });
  } catch (err) {
    if (!(err instanceof StartRefusedError)) throw err;
    process.stderr.write(`epd-encoder: ${err.message}\n`);
    process.exit(78); // EX_CONFIG
  }
  configureApp(app);
  const logger = app.get(Logger);
  const { config } = loaded;
  for (const name of loaded.unknownEnv) {
    logger.warn(`ignoring unknown environment variable ${name} (typo?)`, 'Config');
  }
  const missing = missingServiceFlags();
  if (missing.length > 0 && role !== 'worker') {
    logger.warn(
      `started without ${missing.join(' ')}: under a backlog of NATS calls, V8's default young generation then costs about half a core in garbage collection, and fewer calls are answered (README, Operations); launch it as \`node ${missing.join(' ')} dist/main.js\`, as npm start does`,
      'Main',
    );
  }

  /**
   * A configuration the process must not serve with: says why, closes the app and exits 78
   * (EX_CONFIG). The close is bounded as a SIGTERM's is: a refusal can come while the app
   * is still starting, and a close that then waited on it kept the process up, neither
   * serving nor exiting (seen once in CI: a conflicting object store bucket logged, no exit
   * in 30 s).
   */
  const refuse = async (message: string): Promise<never> => {
    process.stderr.write(`epd-encoder: ${message}\n`);
    // EX_CONFIG, whether the close ends, throws or hangs past the bound.
    return closeAndExit(app, { boundMs: shutdownBoundMs(config), codes: { ok: 78, failed: 78 } });
  };

  // A stop signal's last resort (exit 1 once shutdownBoundMs has passed, if a hook hangs) is
  // armed by stopOnSignals (configureApp), with the wait for the logs to be written out.

  // A model that breaks the contract is a configuration error: refuse to serve with it.
  // (A DP supervisor has no model: its workers each check theirs.)
  if (role !== 'supervisor') {
    app
      .get(EncodeStages)
      .models()
      .catch(async (err: unknown) => {
        const message = (err as Error).message;
        if (!message.startsWith(CONTRACT_ERROR_PREFIX)) return; // load errors: readiness reports them
        await refuse(message);
      });
  }

  // So is a shared bucket whose settings conflict with ours: any of the five (metadata,
  // roster, cache claims, the object store's two), found by the one bucket service.
  void app
    .get(BucketKeeper)
    .refused()
    .then((err) => refuse(err.message));

  let started;
  try {
    started = await startApp(app);
  } catch (err) {
    // A module that refuses at init (an EC path that cannot be written) stops here.
    if (!(err instanceof StartRefusedError)) throw err;
    return refuse(err.message);
  }
  const { httpUrl: base, natsReady } = started;
  if (role === 'worker') {
    await natsReady;
    logger.log(
      `DP worker rank=${config.encoder.dpRank} serving ${config.nats.subjectPrefix}.v1.rank.${config.encoder.dpRank}.<dp_type> (HTTP ${base})`,
      'Main',
    );
    return;
  }
  logger.log(
    {
      http: base,
      docs: `${base}/docs`,
      health: `${base}/health`,
      metrics: `${base}/metrics`,
      nats: redactUrls(config.nats.url.join(',')),
      subjects: `${config.nats.subjectPrefix}.v1.<dp_type>`,
      configFiles: loaded.files,
    },
    `epd-encoder listening on ${base}; waiting for NATS at ${redactUrls(config.nats.url.join(','))}`,
    'Main',
  );
  await natsReady;
  logger.log(`serving NATS subjects ${config.nats.subjectPrefix}.v1.<dp_type>`, 'Main');
  if (process.stdout.isTTY) process.stdout.write(banner(base, config));
}

/** For a person at a terminal (`npm start`): where everything is. Logs carry the same. */
function banner(base: string, config: AppConfig): string {
  const rows = [
    ['HTTP', base],
    ['Dashboard', `${base}/admin/ui`],
    ['API docs', `${base}/docs`],
    ['Metrics', `${base}/metrics`],
    ['Health', `${base}/health/ready`],
    [
      'NATS',
      `${redactUrls(config.nats.url.join(','))}  subjects ${config.nats.subjectPrefix}.v1.<dp_type>`,
    ],
    ['Workers', config.encoder.dpSize > 1 ? `${config.encoder.dpSize} DP workers` : 'one process'],
    ['Try', 'npx epd status    npx epd encode <image> --wait    npx epd load --concurrency 4'],
  ];
  const width = Math.max(...rows.map(([k]) => k!.length));
  return `\n  epd-encoder ready\n${rows.map(([k, v]) => `  ${k!.padEnd(width)}  ${v}`).join('\n')}\n\n`;
}

void main();
