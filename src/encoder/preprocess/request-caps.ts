import { Errors } from '../../common/errors/error-catalogue';
import type { AppConfig } from '../../config/app-config';
import type { MediaPlan } from './preprocess.types';

type Caps = Pick<
  AppConfig['encoder'],
  'maxItems' | 'maxTokensPerRequest' | 'maxDecodedPixels' | 'maxAudioSeconds'
>;

/** Before anything is loaded: the item count (EPD_MAX_ITEMS). */
export function checkItemCount(items: number, caps: Caps, reqId: string): void {
  if (items > caps.maxItems)
    throw Errors.capExceeded('mm_items', items, caps.maxItems, 'EPD_MAX_ITEMS', reqId);
}

/**
 * After the headers are read and before anything is decoded or staged: what the request
 * would cost must fit every per-request cap. Each refusal names its cap and variable.
 */
export function checkPlan(plan: MediaPlan, caps: Caps, reqId: string): void {
  if (plan.audioSeconds > caps.maxAudioSeconds) {
    const seconds = Math.round(plan.audioSeconds * 100) / 100;
    throw Errors.capExceeded(
      'seconds of audio',
      seconds,
      caps.maxAudioSeconds,
      'EPD_MAX_AUDIO_SECONDS',
      reqId,
    );
  }
  if (plan.decodedPixels > caps.maxDecodedPixels) {
    throw Errors.capExceeded(
      'decoded pixels',
      plan.decodedPixels,
      caps.maxDecodedPixels,
      'EPD_MAX_DECODED_PIXELS',
      reqId,
    );
  }
  if (plan.tokens > caps.maxTokensPerRequest) {
    throw Errors.capExceeded(
      'tokens',
      plan.tokens,
      caps.maxTokensPerRequest,
      'EPD_MAX_TOKENS_PER_REQUEST',
      reqId,
    );
  }
}
