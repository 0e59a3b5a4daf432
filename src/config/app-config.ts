import type { EpdConfigShape } from './config.schema';

/**
 * The validated configuration, injected by class token. Code reads typed namespaces
 * (`config.nats.url`) instead of string keys, so a renamed key is a compile error.
 */
export abstract class AppConfig implements EpdConfigShape {
  abstract readonly nats: EpdConfigShape['nats'];
  abstract readonly http: EpdConfigShape['http'];
  abstract readonly timeouts: EpdConfigShape['timeouts'];
  abstract readonly registry: EpdConfigShape['registry'];
  abstract readonly instance: EpdConfigShape['instance'];
  abstract readonly encoder: EpdConfigShape['encoder'];
  abstract readonly media: EpdConfigShape['media'];
  abstract readonly transfer: EpdConfigShape['transfer'];
  abstract readonly cache: EpdConfigShape['cache'];
  abstract readonly overload: EpdConfigShape['overload'];
  abstract readonly scale: EpdConfigShape['scale'];
  abstract readonly sglang: EpdConfigShape['sglang'];
  abstract readonly vllm: EpdConfigShape['vllm'];
  abstract readonly profile: EpdConfigShape['profile'];
  abstract readonly admin: EpdConfigShape['admin'];
  abstract readonly health: EpdConfigShape['health'];
  abstract readonly shutdown: EpdConfigShape['shutdown'];
  abstract readonly log: EpdConfigShape['log'];
}
