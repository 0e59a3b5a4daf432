import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ModelDirError, NO_AUDIO_MODEL, readModelDirs } from './model-dir';
import { projectRoot } from '../common/fs/project-root';
import { ENV_KEYS, OTHER_ENV, configSchema, type EpdConfigShape } from './config.schema';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type Tree = Record<string, unknown>;

export const DEFAULT_CONFIG_DIR = join(projectRoot(), 'config');

function isTree(v: unknown): v is Tree {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function merge(base: Tree, over: Tree): Tree {
  const out: Tree = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const prev = out[k];
    out[k] = isTree(prev) && isTree(v) ? merge(prev, v) : v;
  }
  return out;
}

function readYaml(file: string): Tree {
  let parsed: unknown;
  try {
    parsed = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  if (parsed == null) return {};
  if (!isTree(parsed)) throw new ConfigError(`config file ${file} must hold a YAML mapping`);
  return parsed;
}

export interface LoadedConfig {
  config: EpdConfigShape;
  /** Files read, in precedence order (lowest first). */
  files: string[];
  /** EPD_* variables that match no key: most likely typos, reported at start-up. */
  unknownEnv: string[];
}

/**
 * A variable Kubernetes injects for every Service in the namespace (service links): one
 * named `epd-encoder` gives `EPD_ENCODER_SERVICE_HOST`, `EPD_ENCODER_PORT=tcp://…`,
 * `EPD_ENCODER_PORT_30000_TCP_ADDR` and five more, which are not typos of ours.
 */
function isServiceLink(name: string, value: string): boolean {
  return (
    /^EPD_[A-Z0-9_]+_SERVICE_(HOST|PORT(_[A-Z0-9_]+)?)$/.test(name) ||
    /^EPD_[A-Z0-9_]+_PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?$/.test(name) ||
    (/^EPD_[A-Z0-9_]+_PORT$/.test(name) && /^(tcp|udp|sctp):\/\//.test(value))
  );
}

/**
 * Layers default.yaml < <NODE_ENV>.yaml < $EPD_CONFIG < EPD_* env vars, then validates the
 * result with one zod schema. Throws ConfigError naming the key (and the env var that set
 * it) on the first bad value, so a misconfigured process never starts half-way.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  configDir: string = DEFAULT_CONFIG_DIR,
): LoadedConfig {
  const files = [join(configDir, 'default.yaml')];
  if (env.NODE_ENV) {
    const perEnv = join(configDir, `${env.NODE_ENV}.yaml`);
    if (existsSync(perEnv)) files.push(perEnv);
  }
  if (env.EPD_CONFIG) {
    if (!existsSync(env.EPD_CONFIG))
      throw new ConfigError(`EPD_CONFIG: no such file ${env.EPD_CONFIG}`);
    files.push(env.EPD_CONFIG);
  }
  let tree: Tree = {};
  for (const f of files) tree = merge(tree, readYaml(f));

  const fromEnv = new Map<string, string>();
  const unknownEnv: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('EPD_') || value === undefined) continue;
    const key = ENV_KEYS[name];
    if (!key) {
      if (!OTHER_ENV.has(name) && !isServiceLink(name, value)) unknownEnv.push(name);
      continue;
    }
    const [ns, leaf] = key;
    const section = isTree(tree[ns]) ? tree[ns] : {};
    tree = { ...tree, [ns]: { ...section, [leaf]: value } };
    fromEnv.set(`${ns}.${leaf}`, name);
  }

  const result = configSchema.safeParse(tree);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => {
      const key = issue.path.join('.');
      const source = fromEnv.get(key);
      return `${key}${source ? ` (${source})` : ''}: ${issue.message}`;
    });
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`);
  }
  return { config: withModelDir(result.data, fromEnv), files, unknownEnv };
}

/**
 * EPD_MODEL_DIR: the directory's files decide the model paths and min/max pixels (unless
 * EPD_MIN_PIXELS / EPD_MAX_PIXELS set them); anything it cannot serve is a ConfigError.
 */
function withModelDir(config: EpdConfigShape, fromEnv: Map<string, string>): EpdConfigShape {
  const configured = config.encoder.modelDir;
  if (!configured) return config;
  if (config.encoder.modelPath)
    throw new ConfigError(
      'invalid configuration: encoder.modelDir (EPD_MODEL_DIR) and encoder.modelPath (EPD_MODEL_PATH) both name the vision model: set one',
    );
  let dir;
  try {
    // Every directory is read (and refused) here; the first is the default model's.
    dir = readModelDirs(configured, projectRoot())[0]!;
  } catch (err) {
    if (err instanceof ModelDirError)
      throw new ConfigError(`invalid model directory: ${err.message}`);
    throw err;
  }
  if (dir.audioPath && config.encoder.audioModelPath)
    throw new ConfigError(
      `invalid configuration: ${dir.audioPath} and encoder.audioModelPath (EPD_AUDIO_MODEL_PATH) both name the audio model: set one`,
    );
  return {
    ...config,
    encoder: {
      ...config.encoder,
      modelPath: dir.visionPath,
      // A directory without an audio tower serves no audio, unless a path is set for it.
      audioModelPath: dir.audioPath ?? (config.encoder.audioModelPath || NO_AUDIO_MODEL),
      minPixels: fromEnv.has('encoder.minPixels') ? config.encoder.minPixels : dir.minPixels,
      maxPixels: fromEnv.has('encoder.maxPixels') ? config.encoder.maxPixels : dir.maxPixels,
    },
  };
}
