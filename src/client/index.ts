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
export { MMError, BadRequestError, InternalError } from '../common/errors/mm-error';
export type { ErrorBody } from '../common/errors/error-body';
export { DpType, subjectFor, rankSubjectFor } from '../transport/subjects';
