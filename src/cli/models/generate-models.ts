import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { referenceModelPaths } from '../../encoder/backend/model-paths';
import { buildAudioModel, buildVisionModel } from './reference-models';

export interface GeneratedModel {
  path: string;
  bytes: number;
  sha256: string;
  written: boolean;
}

function write(path: string, build: () => Uint8Array, force: boolean): GeneratedModel {
  if (existsSync(path) && !force) return { path, bytes: 0, sha256: '', written: false };
  mkdirSync(dirname(path), { recursive: true });
  const bytes = build();
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, path); // atomic: a concurrent reader never sees half a model
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  return { path, bytes: bytes.length, sha256, written: true };
}

/** Writes the reference models (fixed seed) where the service looks for them, unless present. */
export function ensureReferenceModels(
  options: { force?: boolean; dim?: number } = {},
): GeneratedModel[] {
  const { vision, audio } = referenceModelPaths();
  const dim = options.dim ?? 1024;
  return [
    write(vision, () => buildVisionModel(dim), options.force ?? false),
    write(audio, () => buildAudioModel(dim), options.force ?? false),
  ];
}

/** A vision model of another width in `dir` (tests and benchmarks that need a slower forward). */
export function writeVisionModel(dir: string, dim: number): string {
  const path = join(dir, `vision-encoder-${dim}.onnx`);
  write(path, () => buildVisionModel(dim), false);
  return path;
}
