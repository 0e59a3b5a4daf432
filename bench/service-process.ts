import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../test/support/nats-server';
import { stopProcess } from '../test/support/service-process';

export const ROOT = join(__dirname, '..', '..');

/** Starts `node dist/main.js` on a free port and waits until /health is 200. */
export async function startService(
  env: Record<string, string>,
): Promise<{ proc: ChildProcess; url: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const nodeArgs = process.env.EPD_BENCH_PROFILE_DIR
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.EPD_BENCH_PROFILE_DIR}`]
    : [];
  const proc = spawn(process.execPath, [...nodeArgs, join(ROOT, 'dist', 'main.js')], {
    env: { ...process.env, EPD_HTTP_PORT: String(port), EPD_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${url}/health`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline || proc.exitCode !== null)
      throw new Error('service did not become ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, url, stop: () => stopProcess(proc) };
}

export { stopProcess };
