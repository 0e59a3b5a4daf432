import { Injectable } from '@nestjs/common';
import { map, type Observable } from 'rxjs';
import { MetaRegistry, type WaitOptions } from './meta-registry.service';
import type { EmbeddingMeta, PublishMetadataRequest, WaitMetadataResponse } from './meta.schema';

/**
 * The request/response shapes of the metadata operations, shared by the NATS handlers
 * and the HTTP routes so that both transports answer identically.
 */
@Injectable()
export class MetadataService {
  constructor(private readonly registry: MetaRegistry) {}

  async publish(req: PublishMetadataRequest): Promise<null> {
    await this.registry.publish(req.req_id, req.metadata, req.part_idx);
    return null;
  }

  /** `timeoutMs` is already resolved and capped by the caller (the Deadlines helper). */
  wait(
    reqId: string,
    partIdx: number | undefined,
    options: WaitOptions,
  ): Observable<WaitMetadataResponse> {
    return this.registry.wait$(reqId, options).pipe(
      map((record) => ({
        ...(record.metadata as EmbeddingMeta),
        req_id: reqId,
        part_idx: partIdx ?? record.partIdx ?? 0,
      })),
    );
  }

  async has(reqId: string): Promise<{ req_id: string; present: boolean }> {
    return { req_id: reqId, present: await this.registry.has(reqId) };
  }
}
