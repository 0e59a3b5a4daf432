import { Injectable, type PipeTransform } from '@nestjs/common';
import { assertJsonDepth } from '../../common/validation/json-depth';
import { RejectedPayload } from '../../common/validation/zod.pipe';
import { parseEncodeRequest, type EncodeRequest } from '../encode-request.schema';

/** Validates an encode body (HTTP or NATS) with SGLang's exact messages, before anything is queued. */
@Injectable()
export class EncodeRequestPipe implements PipeTransform<unknown, EncodeRequest> {
  transform(value: unknown): EncodeRequest {
    if (value instanceof RejectedPayload) throw value.error;
    assertJsonDepth(value);
    return parseEncodeRequest(value);
  }
}
