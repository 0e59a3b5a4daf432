import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The project root (where package.json is), from src/, dist/ or any build output dir. */
export function projectRoot(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'config'))) return dir;
    if (dirname(dir) === dir) return process.cwd();
  }
}

/** Where `npm run models` writes the generated reference models. */
export function referenceModelPaths(): { vision: string; audio: string } {
  const dir = join(projectRoot(), 'models');
  return { vision: join(dir, 'vision-encoder.onnx'), audio: join(dir, 'audio-encoder.onnx') };
}
