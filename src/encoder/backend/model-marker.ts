import { closeSync, openSync, readSync } from 'node:fs';
import { basename } from 'node:path';
import type { ModelKind } from '../pipeline/model-contract';

/** `producer_name` of the generated reference models (random weights, `npm run models`). */
export const REFERENCE_PRODUCER = 'epd-encoder-reference';
/** Their `doc_string`, for anyone who opens one in an ONNX viewer. */
export const REFERENCE_DOC =
  'epd-encoder reference model: random weights from a fixed seed, with the model contract of a real tower. Its embeddings are meaningless; serve a real tower (docs/models.md).';

export { StartRefusedError } from '../../common/start-refused';

/** How much of a file is read for its leading fields (they come before the graph). */
const HEAD_BYTES = 64 * 1024;

/** One model this process serves, as /health, /metrics and the start log name it. */
export interface ServedModel {
  kind: ModelKind;
  /** The file's base name without `.onnx`. */
  name: string;
  /** The model family whose contract it has (a model directory's config.json names it). */
  family: string;
  path: string;
  /** A generated stand-in (random weights), not a real tower. */
  reference: boolean;
}

/**
 * `producer_name` and `doc_string` of an ONNX file, read from its first 64 KiB without
 * parsing the graph: protobuf writes a ModelProto's fields in field order, and these (2 and
 * 6) come before the graph (7), whatever the model's size.
 */
export function readModelHead(path: string): { producerName?: string; docString?: string } {
  const buf = Buffer.alloc(HEAD_BYTES);
  const fd = openSync(path, 'r');
  let n: number;
  try {
    n = readSync(fd, buf, 0, HEAD_BYTES, 0);
  } finally {
    closeSync(fd);
  }
  const out: { producerName?: string; docString?: string } = {};
  let at = 0;
  const varint = (): number => {
    let value = 0;
    let shift = 0;
    for (;;) {
      if (at >= n || shift > 49) throw new Error('truncated');
      const b = buf[at++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
      shift += 7;
    }
  };
  try {
    while (at < n) {
      const tag = varint();
      const field = Math.floor(tag / 8);
      const wire = tag % 8;
      if (field === 7 || field === 0) break; // the graph: nothing of ours after it
      if (wire === 0) varint();
      else if (wire === 1) at += 8;
      else if (wire === 5) at += 4;
      else if (wire === 2) {
        const len = varint();
        if (at + len > n) break;
        const text = buf.toString('utf8', at, at + len);
        if (field === 2) out.producerName = text;
        if (field === 6) out.docString = text;
        at += len;
      } else break;
    }
  } catch {
    // not a ModelProto we can read the head of: no marker
  }
  return out;
}

export function servedModel(
  kind: ModelKind,
  path: string,
  dir?: { name: string; family: string },
): ServedModel {
  return {
    kind,
    name: dir?.name ?? basename(path).replace(/\.onnx$/i, ''),
    family: dir?.family ?? (kind === 'vision' ? 'qwen2-vl' : 'qwen2-audio'),
    path,
    reference: readModelHead(path).producerName === REFERENCE_PRODUCER,
  };
}
