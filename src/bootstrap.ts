import type { IncomingMessage } from 'node:http';
import { contextFromHttp, tracingEnabled, withContext } from './tracing/tracing';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { INestApplication } from '@nestjs/common';
import type { CustomStrategy } from '@nestjs/microservices';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { jsonBody } from './common/http/json-body.middleware';
import { requestLogging } from './logging/logging.module';
import { stopOnSignals } from './logging/stop-on-signals';
import { shutdownBoundMs } from './config/shutdown-bound';
import { AppConfig } from './config/app-config';
import { ProcessRole } from './config/process-role';
import { InstanceRoster } from './routing/instance-roster.service';
import { SglangBootstrap } from './sglang/sglang-bootstrap.service';
import { ProxyRegistrar } from './vllm/proxy-registrar.service';
import { EpdNatsServer } from './transport/epd-nats.server';
import { IpcRpcServer } from './transport/ipc-rpc.server';
import { WorkBudget } from './encoder/pipeline/work-budget';
import { Clock } from './common/clock';

/**
 * Wiring shared by main.ts and the e2e tests, so that tests run the app exactly as
 * production does: pino logger, the NATS microservice on the shared connection (with the
 * app's global filter), OpenAPI at /docs, and shutdown hooks.
 */
export function configureApp(
  app: INestApplication,
  options: { shutdownHooks?: boolean } = {},
): void {
  app.useLogger(app.get(Logger));
  const { trustProxy } = app.get(AppConfig).http;
  if (trustProxy !== undefined) {
    // Express's own setting: a hop count when numeric, else addresses, subnets or names.
    const hops = Number(trustProxy);
    (app.getHttpAdapter().getInstance() as { set(k: string, v: unknown): void }).set(
      'trust proxy',
      Number.isInteger(hops) ? hops : trustProxy === 'true' ? true : trustProxy,
    );
  }
  // Create the app with `bodyParser: false`: this parser replaces Nest's default one.
  // With tracing on, a caller's `traceparent` header parents the request's spans.
  if (tracingEnabled()) {
    app.use((req: IncomingMessage, _res: unknown, next: () => void) =>
      withContext(contextFromHttp(req.headers), next),
    );
  }
  const { http, encoder } = app.get(AppConfig);
  app.use(
    jsonBody({
      limit: http.maxBodyBytes,
      timeoutMs: http.bodyTimeoutMs,
      // The encodes' working memory; a DP supervisor encodes nothing, and bounds its bodies
      // alone by the same EPD_WORK_MAX_BYTES.
      budget: app.get(ProcessRole).supervisor
        ? new WorkBudget(encoder.workMaxBytes, () => app.get(Clock).now())
        : app.get(WorkBudget),
    }),
  );
  // After the body parser: request lines name the req_id of the body.
  app.use(requestLogging());
  app.connectMicroservice<CustomStrategy>(
    { strategy: app.get(EpdNatsServer) },
    { inheritAppConfig: true },
  );
  // A DP worker also answers its supervisor over the fork's IPC channel (same handlers).
  if (app.get(ProcessRole).worker) {
    app.connectMicroservice<CustomStrategy>(
      { strategy: app.get(IpcRpcServer) },
      { inheritAppConfig: true },
    );
  }
  SwaggerModule.setup('docs', app, openApiDocument(app));
  // Only the signals that mean "stop": Nest's default also takes SIGUSR2 and friends, which
  // left no signal for `--heapsnapshot-signal=SIGUSR2` (a heap snapshot stopped the service).
  // The process exits 0 once the hooks are done and the logs written out, not by Nest's
  // default of killing itself with the signal again: a signal death skips the 'exit' event
  // on which pino writes out what it still holds, and the last lines (a drain's report of
  // what it handed over) were lost. Bounded by shutdownBoundMs (exit 1 past it).
  if (options.shutdownHooks !== false) {
    const logger = app.get(Logger);
    stopOnSignals(app, {
      signals: ['SIGTERM', 'SIGINT', 'SIGHUP'],
      boundMs: shutdownBoundMs(app.get(AppConfig)),
      onCloseError: (err) =>
        logger.error(`shutdown failed: ${(err as Error)?.stack ?? String(err)}`, 'Main'),
    });
  }
}

/** The OpenAPI document of the app's HTTP routes: served at /docs, and docs/http-api.md. */
export function openApiDocument(app: INestApplication): OpenAPIObject {
  return SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('epd-encoder')
      .setDescription(
        'Encoder tier of EPD-disaggregated multimodal serving. NATS subjects and payloads: see docs/contract.md §1 and docs/nats-reference.md.',
      )
      .addBearerAuth()
      .build(),
  );
}

/**
 * How long an idle kept-alive HTTP connection stays open: longer than the clients and load
 * balancers in front keep theirs (undici 4 s after this server's hint, AWS ALB 60 s), so
 * that the client always closes first. With Node's 5 s a client that reused a connection
 * as the service closed it got "socket hang up" / "other side closed" (CI: a GET /metrics
 * after a 20,000-call NATS burst; reproduced in http-keepalive.e2e-spec.ts). Node closes
 * idle connections at shutdown, so this does not delay a stop.
 */
const HTTP_KEEP_ALIVE_MS = 65_000;

/**
 * Starts HTTP first, so health answers (and says why) while NATS is still unreachable.
 * `natsReady` settles once the first NATS connection is up and every subject is served.
 */
export async function startApp(
  app: INestApplication,
): Promise<{ httpUrl: string; natsReady: Promise<void> }> {
  const config = app.get(AppConfig);
  await app.listen(config.http.port, config.http.host);
  const server = app.getHttpServer() as Server;
  server.keepAliveTimeout = HTTP_KEEP_ALIVE_MS;
  server.headersTimeout = HTTP_KEEP_ALIVE_MS + 1000; // Node: must exceed keepAliveTimeout
  const address = server.address() as AddressInfo;
  const httpUrl = `http://${config.http.host}:${address.port}`;
  app.get(SglangBootstrap).start(httpUrl);
  app.get(ProxyRegistrar).start(httpUrl);
  app.get(InstanceRoster).setHttpUrl(httpUrl);
  const natsReady = app.startAllMicroservices().then(() => undefined);
  return { httpUrl, natsReady };
}
