import { instanceRankSubjectFor, instanceSubjectFor, rankSubjectFor, subjectFor } from './subjects';
import {
  anyTenantSubjectFor,
  probeSubjectFor,
  TENANT_DP_TYPES,
  type CallSpace,
} from './tenant-scope';

/** What a process subscribes to for one dp_type. */
export interface DpTypeSubjects {
  /** In the queue group: shared with every other member (withdrawn while it sheds). */
  shared: string[];
  /** Its own: calls forwarded to this process. */
  own: string[];
  /** Where callers ask again about a call they sent (receipts.ts). */
  probes: string[];
}

/**
 * The subjects a process serves, and the one its receipts name for asking again, by its
 * DP role: a worker (WorkerSubjects) or an instance (InstanceSubjects: one process, or a
 * supervisor). Chosen by the transport module.
 */
export abstract class ServedSubjects {
  abstract of(dpType: string): DpTypeSubjects;
  /** Where a caller in `space` asks again about a call on `dpType` (its receipt says so). */
  abstract askAgain(dpType: string, space: CallSpace): string;
}

/** A DP worker: its rank's shared subject, its own, and its probe. */
export class WorkerSubjects extends ServedSubjects {
  constructor(
    private readonly prefix: string,
    private readonly instance: string,
    private readonly rank: number,
  ) {
    super();
  }

  of(dpType: string): DpTypeSubjects {
    const { prefix, instance, rank } = this;
    return {
      shared: [rankSubjectFor(prefix, rank, dpType)],
      own: [instanceRankSubjectFor(prefix, instance, rank, dpType)],
      probes: [probeSubjectFor(prefix, undefined, instance, dpType, rank)],
    };
  }

  askAgain(dpType: string, space: CallSpace): string {
    const { prefix, instance, rank } = this;
    if (space.kind === 'internal') return instanceRankSubjectFor(prefix, instance, rank, dpType);
    const tenant = space.kind === 'tenant' ? space.tenant : undefined;
    return probeSubjectFor(prefix, tenant, instance, dpType, rank);
  }
}

/**
 * An instance (one process, or a DP supervisor): the shared subject and, for the calls
 * tenants make, every tenant's (tenant-scope.ts: which tenant a caller may act as is NATS
 * permissions' to say); its own and its probes; alone (no DP workers), rank 0's too.
 */
export class InstanceSubjects extends ServedSubjects {
  constructor(
    private readonly prefix: string,
    private readonly instance: string,
    /** Without DP workers, this process is rank 0 and serves its subject. */
    private readonly aloneAsRank?: number,
  ) {
    super();
  }

  of(dpType: string): DpTypeSubjects {
    const { prefix, instance } = this;
    const tenants = TENANT_DP_TYPES.has(dpType);
    return {
      shared: [
        subjectFor(prefix, dpType),
        ...(tenants ? [anyTenantSubjectFor(prefix, dpType)] : []),
      ],
      own: [
        ...(this.aloneAsRank !== undefined
          ? [rankSubjectFor(prefix, this.aloneAsRank, dpType)]
          : []),
        instanceSubjectFor(prefix, instance, dpType),
      ],
      probes: [
        probeSubjectFor(prefix, undefined, instance, dpType),
        ...(tenants ? [probeSubjectFor(prefix, '*', instance, dpType)] : []),
      ],
    };
  }

  askAgain(dpType: string, space: CallSpace): string {
    const { prefix, instance } = this;
    if (space.kind === 'internal') return instanceSubjectFor(prefix, instance, dpType);
    const tenant = space.kind === 'tenant' ? space.tenant : undefined;
    return probeSubjectFor(prefix, tenant, instance, dpType);
  }
}
