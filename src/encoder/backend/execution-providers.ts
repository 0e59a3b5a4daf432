import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { listSupportedBackends } from 'onnxruntime-node';
import { StartRefusedError } from './model-marker';

/** How each provider that onnxruntime-node does not bundle is installed. */
const INSTALL: Readonly<Record<string, string>> = {
  cuda: 'ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js (onnxruntime-node downloads its CUDA 12 provider from the ONNX Runtime release; the machine needs CUDA 12 and cuDNN 9)',
  tensorrt:
    'ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js, with TensorRT installed on the machine',
};

/** Where onnxruntime-node keeps its native libraries for this platform. */
function binDir(): string | undefined {
  const root = join(dirname(require.resolve('onnxruntime-node/package.json')), 'bin');
  const napi = existsSync(root) ? readdirSync(root).find((d) => d.startsWith('napi-v')) : undefined;
  return napi ? join(root, napi, process.platform, process.arch) : undefined;
}

/**
 * EPD_ORT_EXECUTION_PROVIDERS checked before any session opens: each one must be a backend
 * onnxruntime-node supports on this platform, and one it does not bundle (cuda, tensorrt)
 * must have its provider library installed. A missing one stops the start with the install
 * command that brings it; the names are returned for the sessions, in order.
 */
export function checkExecutionProviders(names: readonly string[]): string[] {
  const supported = listSupportedBackends();
  const dir = binDir();
  for (const name of names) {
    const backend = supported.find((b) => b.name === name);
    if (!backend)
      throw new StartRefusedError(
        `EPD_ORT_EXECUTION_PROVIDERS names ${name}, which onnxruntime-node does not support on ${process.platform}/${process.arch} (it supports: ${supported.map((b) => b.name).join(', ')})`,
      );
    if (backend.bundled) continue;
    const lib = dir ? join(dir, `libonnxruntime_providers_${name}.so`) : undefined;
    if (!lib || !existsSync(lib))
      throw new StartRefusedError(
        `EPD_ORT_EXECUTION_PROVIDERS names ${name}, but onnxruntime-node's ${name} provider is not installed (no ${lib ?? 'native library directory'}). Install it with: ${INSTALL[name] ?? 'a build of onnxruntime-node that includes it'}`,
      );
  }
  return [...names];
}

/** The providers this machine can use now (for scripts/device-check.sh). */
export function availableExecutionProviders(): string[] {
  return listSupportedBackends()
    .map((b) => b.name)
    .filter((name) => {
      try {
        checkExecutionProviders([name]);
        return true;
      } catch {
        return false;
      }
    });
}
