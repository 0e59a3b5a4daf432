import { join } from 'node:path';
import { projectRoot } from '../common/fs/project-root';

/** Where `npm run models` writes the generated reference models. */
export function referenceModelPaths(): { vision: string; audio: string } {
  const dir = join(projectRoot(), 'models');
  return { vision: join(dir, 'vision-encoder.onnx'), audio: join(dir, 'audio-encoder.onnx') };
}
