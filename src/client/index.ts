export { EncoderClient } from './encoder-client';
export type {
  EncoderClientOptions,
  RetryPolicy,
  WaitMetadataOptions,
  EmbeddingMeta,
  MetaPayload,
  WaitMetadataResponse,
  EncodeBody,
  EncodeResult,
} from './encoder-client';
export { MMError, BadRequestError, InternalError, type ErrorBody } from '../common/errors/mm-error';
export { DpType, subjectFor, rankSubjectFor } from '../transport/subjects';
