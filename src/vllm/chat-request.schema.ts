import { z } from 'zod';
import type { Modality } from '../common/kernel';

const url = z.object({ url: z.string().min(1, 'url must not be empty') });
/** vLLM's per-part `uuid`: the identifier the consumer's scheduler looks up (its mm_hash). */
const uuid = z.string().nullish();

/** The content parts an encode instance encodes; text parts are accepted and ignored. */
const part = z.discriminatedUnion(
  'type',
  [
    z.looseObject({ type: z.literal('image_url'), image_url: url, uuid }),
    z.looseObject({ type: z.literal('video_url'), video_url: url, uuid }),
    z.looseObject({ type: z.literal('audio_url'), audio_url: url, uuid }),
    z.looseObject({
      type: z.literal('input_audio'),
      input_audio: z.object({
        data: z.string().min(1),
        format: z.string().regex(/^[a-z0-9]{1,10}$/, 'input_audio.format must be like wav or mp3'),
      }),
      uuid,
    }),
    z.looseObject({ type: z.literal('text'), text: z.string() }),
  ],
  {
    error: (iss) =>
      iss.code === 'invalid_union'
        ? 'each content part must be of type image_url, video_url, audio_url, input_audio or text'
        : undefined,
  },
);

/**
 * What vLLM's disagg proxy POSTs to an encode instance: `{model, messages: [{role: "user",
 * content: [{...part, uuid}]}], stream: false}` (other OpenAI fields are accepted and ignored).
 */
export const chatRequestSchema = z.looseObject({
  model: z.string().optional(),
  stream: z
    .boolean()
    .nullish()
    .refine((s) => s !== true, 'stream=true is not supported by an encode instance'),
  messages: z
    .array(
      z.looseObject({
        role: z.string(),
        // A plain string is text: nothing to encode.
        content: z.preprocess((c) => (typeof c === 'string' ? [] : c), z.array(part).nullish()),
      }),
    )
    .min(1, 'messages must not be empty'),
});

export type ChatRequest = z.output<typeof chatRequestSchema>;

/** One media part to encode, in the order of the request. */
export interface MediaPart {
  modality: Modality;
  url: string;
  uuid?: string;
}

/** The media parts of every message, in order; `input_audio` becomes a data URI. */
export function mediaParts(req: ChatRequest): MediaPart[] {
  const parts: MediaPart[] = [];
  for (const m of req.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const p of m.content) {
      const id = 'uuid' in p && typeof p.uuid === 'string' ? { uuid: p.uuid } : {};
      if (p.type === 'image_url') parts.push({ modality: 'image', url: p.image_url.url, ...id });
      else if (p.type === 'video_url')
        parts.push({ modality: 'video', url: p.video_url.url, ...id });
      else if (p.type === 'audio_url')
        parts.push({ modality: 'audio', url: p.audio_url.url, ...id });
      else if (p.type === 'input_audio') {
        const { data, format } = p.input_audio;
        parts.push({ modality: 'audio', url: `data:audio/${format};base64,${data}`, ...id });
      }
    }
  }
  return parts;
}
