import { Global, Module } from '@nestjs/common';
import type { Owner } from '../meta-registry/meta-store';

/**
 * Embeddings handed to the cluster by an instance that stopped (the object store tier,
 * EPD_CACHE_STORE=jetstream with EPD_REGISTRY_STORE=jetstream), as owner routing reaches
 * them. The handoff's (EmbeddingHandoff) where it is on; NoStoredOwners elsewhere.
 */
export abstract class StoredOwners {
  /** Whether this process reads the staged bucket (takes handed-off embeddings over). */
  abstract readonly active: boolean;
  /**
   * Stages the handed-off embedding here (one read, however many calls ask), or throws
   * embedding_lost; resolves with the owner when another instance took it over first.
   */
  abstract take(reqId: string, owner: Owner, deadline: number): Promise<Owner | undefined>;
  /** A takeover of `reqId` under way here, if any (settles when it ends, either way). */
  abstract takingNow(reqId: string): Promise<unknown> | undefined;
  /**
   * A release of a handed-off embedding nobody took: it leaves the store. Resolves with
   * the owner when another instance took it over first (the release goes there).
   */
  abstract drop(reqId: string): Promise<Owner | undefined>;
  /**
   * While this (stopping) process hands `reqId` to the cluster: settles true once it has
   * (calls for it are then answered elsewhere), false if it could not (answered here).
   */
  abstract handingOff(reqId: string): Promise<boolean> | undefined;
}

/** A process that does not read the staged bucket: nothing is taken over or handed off here. */
export class NoStoredOwners extends StoredOwners {
  readonly active = false;

  take(): Promise<Owner | undefined> {
    return Promise.resolve(undefined);
  }

  takingNow(): undefined {
    return undefined;
  }

  drop(): Promise<Owner | undefined> {
    return Promise.resolve(undefined);
  }

  handingOff(): undefined {
    return undefined;
  }
}

/** StoredOwners for a process without the handoff (a DP supervisor or worker). */
@Global()
@Module({
  providers: [{ provide: StoredOwners, useClass: NoStoredOwners }],
  exports: [StoredOwners],
})
export class NoStoredOwnersModule {}
