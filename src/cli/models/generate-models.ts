import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { referenceModelPaths } from '../../encoder/backend/model-paths';
import { buildAudioModel, buildVisionModel } from './reference-models';

export interface GeneratedModel {
  path: string;
  bytes: number;
  sha256: string;
  written: boolean;
}

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/**
 * Writes the model unless the file already holds exactly these bytes (deterministic, so
 * a model left by an older contract is replaced instead of refused at start-up).
 */
function write(path: string, build: () => Uint8Array, force: boolean): GeneratedModel {
  const bytes = build();
  const sha256 = sha(bytes);
  if (!force && existsSync(path) && sha(readFileSync(path)) === sha256)
    return { path, bytes: bytes.length, sha256, written: false };
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, path); // atomic: a concurrent reader never sees half a model
  return { path, bytes: bytes.length, sha256, written: true };
}

/** Writes the reference models (fixed seed) where the service looks for them, unless current. */
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
