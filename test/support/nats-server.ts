import { leftOpen } from './left-open';
import { waitFor } from './wait';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ host: '127.0.0.1', port });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

export interface NatsServerOptions {
  port?: number;
  /** Raises max_payload (and max_pending with it, as the server requires). */
  maxPayload?: number;
  /** More server configuration (TLS, authorization), as nats-server.conf text. */
  config?: string;
  /** Environment of the server process (for `$VAR` in the configuration). */
  env?: Record<string, string>;
  /** JetStream on (the default), or off: a server where no KV bucket can be opened. */
  jetstream?: boolean;
}

/**
 * A real nats-server (Debian package) on 127.0.0.1 with JetStream and its own store dir,
 * started and stopped by PID. `restart()` brings it back on the same port.
 */
export class NatsServer {
  private proc?: ChildProcess;
  private readonly dir = mkdtempSync(join(tmpdir(), 'epd-test-nats-'));
  private stderr = '';

  private constructor(
    readonly port: number,
    private readonly options: NatsServerOptions,
  ) {}

  static async start(options: NatsServerOptions = {}): Promise<NatsServer> {
    const server = new NatsServer(options.port ?? (await freePort()), { ...options });
    await server.launch();
    server.forget = leftOpen({ close: () => server.disposeNow() });
    return server;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  private async launch(): Promise<void> {
    const args = ['-a', '127.0.0.1', '-p', String(this.port)];
    if (this.options.jetstream !== false) args.push('-js', '-sd', join(this.dir, 'js'));
    let conf = '';
    if (this.options.maxPayload) {
      const pending = Math.max(64 * 1024 * 1024, this.options.maxPayload * 4);
      conf += `max_payload: ${this.options.maxPayload}\nmax_pending: ${pending}\n`;
    }
    if (this.options.config) conf += `${this.options.config}\n`;
    if (conf) {
      const file = join(this.dir, 'nats.conf');
      writeFileSync(file, conf);
      args.push('-c', file);
    }
    this.stderr = '';
    const proc = spawn('nats-server', args, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...this.options.env },
    });
    proc.stderr?.on('data', (b: Buffer) => {
      this.stderr = (this.stderr + b.toString()).slice(-4000);
    });
    this.proc = proc;
    try {
      await waitFor(
        async () => {
          if (proc.exitCode !== null) throw new Error(`exited (${proc.exitCode})`);
          return canConnect(this.port);
        },
        10_000,
        50,
      );
    } catch (err) {
      proc.kill('SIGKILL');
      throw new Error(
        `nats-server did not start on ${this.port} (${(err as Error).message}): ${this.stderr}`,
        { cause: err },
      );
    }
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  /** SIGKILL, as a crash: no lame-duck mode, clients see the socket die. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await exited;
  }

  /** Stops the server and starts it again on its port, with `changes` to its options. */
  async restart(changes: Partial<NatsServerOptions> = {}): Promise<void> {
    await this.stop();
    Object.assign(this.options, changes);
    await this.launch();
  }

  /** Set once started: dispose() through it, so that the after-file sweep skips it. */
  private forget?: () => Promise<void>;

  async dispose(): Promise<void> {
    if (this.forget) return this.forget();
    return this.disposeNow();
  }

  private async disposeNow(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
