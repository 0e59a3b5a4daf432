import { publicReqId, unscopeReply } from '../common/tenant';
import type { Modality } from '../common/kernel';
import type { FrameHeader } from '../transfer/frame';
import type { SendRequest } from './delivery.schema';
import type { ReqState, StagedEmbedding } from '../requests/req-state.store';

/**
 * The header of a staged embedding's frame: its shape, dtype and size, the destination's
 * session and buffer (SGLang's Mooncake fields), its modality and grid, and, for a video to
 * Qwen2.5-VL or Qwen3-VL, its timing (`second_per_grid_ts` / `video_timestamps`).
 */
export function embeddingFrame(
  state: ReqState,
  emb: StagedEmbedding,
  req?: SendRequest,
): FrameHeader {
  return {
    req_id: publicReqId(state.reqId),
    part_idx: state.partIdx,
    num_parts: state.numParts,
    shape: [emb.tokens, emb.dim],
    dtype: emb.dtype,
    byte_length: emb.bytes,
    session_id: req?.session_id != null ? String(req.session_id) : null,
    buffer_address: req?.buffer_address ?? null,
    modality: state.modality,
    grid_thw: emb.grid,
    ...emb.timing,
  };
}

/** The frame that tells a receiver its part failed: no bytes, the error's status and message. */
export function errorFrame(
  reqId: string,
  f: { modality: Modality; partIdx: number; numParts: number; message: string; code: number },
): FrameHeader {
  return {
    req_id: publicReqId(reqId),
    part_idx: f.partIdx,
    num_parts: f.numParts,
    shape: [0],
    dtype: 'float32',
    byte_length: 0,
    session_id: null,
    buffer_address: null,
    modality: f.modality,
    error_msg: unscopeReply(f.message, reqId),
    error_code: f.code,
  };
}
