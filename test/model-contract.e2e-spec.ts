import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { sharedNatsUrl } from './support/app';
import { freePort } from './support/nats-server';
import { MAIN, stopProcess } from './support/service-process';

it('refuses to serve with a model that breaks the contract: exit 78, naming the variable and the mismatch', async () => {
  const proc = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      EPD_HTTP_PORT: String(await freePort()),
      EPD_NATS_URL: sharedNatsUrl(),
      EPD_LOG_LEVEL: 'warn',
      // The audio model where the vision model belongs: [windows, 128, 3000], not [patches, 1176].
      EPD_MODEL_PATH: join(__dirname, '..', 'models', 'audio-encoder.onnx'),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  try {
    const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
    expect(code).toBe(78);
    expect(stderr).toContain('model does not match the encoder contract: vision model');
    expect(stderr).toContain('(EPD_MODEL_PATH): input 0 input_features has rank 3, expected 2');
  } finally {
    await stopProcess(proc);
  }
});
