import { Errors } from '../../common/errors/error-catalogue';
import type { AppConfig } from '../../config/app-config';
import type { MediaPlan } from './preprocess.types';

type Caps = Pick<
  AppConfig['encoder'],
  | 'maxItems'
  | 'maxTokensPerRequest'
  | 'maxDecodedPixels'
  | 'maxAudioSeconds'
  | 'maxDecodedAudioBytes'
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
  const checks: [what: string, value: number, max: number, variable: string][] = [
    ['seconds of audio', plan.audioSeconds, caps.maxAudioSeconds, 'EPD_MAX_AUDIO_SECONDS'],
    [
      'bytes of decoded audio',
      plan.decodedAudioBytes,
      caps.maxDecodedAudioBytes,
      'EPD_MAX_DECODED_AUDIO_BYTES',
    ],
    ['decoded pixels', plan.decodedPixels, caps.maxDecodedPixels, 'EPD_MAX_DECODED_PIXELS'],
    ['tokens', plan.tokens, caps.maxTokensPerRequest, 'EPD_MAX_TOKENS_PER_REQUEST'],
  ];
  for (const [what, value, max, variable] of checks) {
    // Compared exactly; only the message rounds (seconds to 10 ms).
    const shown = Math.round(value * 100) / 100;
    if (value > max) throw Errors.capExceeded(what, shown, max, variable, reqId);
  }
}
