import { configDoc } from './config-doc';
import { errorsDoc } from './errors-doc';
import { metricsDoc } from './metrics-doc';

/** Every generated page under the project root, and how to render it. */
export const GENERATED_DOCS: Readonly<Record<string, () => string>> = {
  'docs/metrics.md': metricsDoc,
  'docs/configuration.md': configDoc,
  'docs/errors.md': errorsDoc,
};
