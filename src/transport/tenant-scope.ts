import { DpType } from './subjects';

/**
 * Tenants as subject prefixes (docs/threat-model.md). A call that arrives on
 * `<prefix>.v1.t.<tenant>.<dp_type>` acts in that tenant's space: its `req_id` R becomes
 * `<tenant>/R` inside the service (request state, metadata, staging, the cache's keys), and
 * every reply and every data-plane frame says R again. NATS permissions decide who may
 * publish on which tenant's subjects; the service trusts the subject, as it trusts NATS
 * for who may call at all. Within a tenant, components trust each other as in SGLang.
 *
 * Calls on every other public subject act in the shared space, whose req_ids may not
 * contain `/`: no caller can name a tenant's req_id from outside it. Instance subjects
 * (owner routing between encoders) carry the inner form as is.
 */

/** A tenant's name: a single subject token. */
export const TENANT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** What only operators may call: profiling, publish_metadata, the cluster's stats. */
const OPERATOR_DP_TYPES: ReadonlySet<string> = new Set([
  DpType.PublishMetadata,
  DpType.StartProfile,
  DpType.StopProfile,
  DpType.Stats,
]);

/** What a tenant may call: every dp_type but the operators'. */
export const TENANT_DP_TYPES: ReadonlySet<string> = new Set(
  Object.values(DpType).filter((dp) => !OPERATOR_DP_TYPES.has(dp)),
);

/** `<prefix>.v1.t.<tenant>.<dp_type>`. */
export function tenantSubjectFor(prefix: string, tenant: string, dpType: string): string {
  return `${prefix}.v1.t.${tenant}.${dpType}`;
}

/** The subscription that receives every tenant's calls of one dp_type. */
export function anyTenantSubjectFor(prefix: string, dpType: string): string {
  return tenantSubjectFor(prefix, '*', dpType);
}

/**
 * Where a caller asks this process again about a call it took (the receipt's Epd-Probe),
 * in the caller's own space, so the caller's permissions cover it: `<prefix>.v1.probe.<id>`
 * or `<prefix>.v1.t.<tenant>.probe.<id>`, then `.<dp_type>` (`rank.<N>.` before it in a
 * DP worker).
 */
export function probeSubjectFor(
  prefix: string,
  tenant: string | undefined,
  instanceId: string,
  dpType: string,
  rank?: number,
): string {
  const space = tenant === undefined ? `${prefix}.v1` : `${prefix}.v1.t.${tenant}`;
  const at = rank === undefined ? instanceId : `${instanceId}.rank.${rank}`;
  return `${space}.probe.${at}.${dpType}`;
}

/** Whether `subject` is a probe subject (probeSubjectFor), where calls are only looked up. */
export function isProbeSubject(prefix: string, subject: string): boolean {
  const head = `${prefix}.v1.`;
  if (!subject.startsWith(head)) return false;
  const rest = subject.slice(head.length);
  if (rest.startsWith('probe.')) return true;
  if (!rest.startsWith('t.')) return false;
  const dot = rest.indexOf('.', 2);
  return dot > 2 && rest.startsWith('probe.', dot + 1);
}

/** Where a call arrived, as far as req_ids are concerned. */
export type CallSpace =
  | { kind: 'tenant'; tenant: string }
  | { kind: 'shared' }
  /** Between encoders: req_ids are already in their inner form. */
  | { kind: 'internal' }
  /** A tenant subject whose tenant token is not a tenant name: refused, never shared. */
  | { kind: 'invalid'; tenant: string };

/** The space of a call that arrived on `subject` (`prefix`: EPD_SUBJECT_PREFIX). */
export function spaceOf(prefix: string, subject: string): CallSpace {
  const head = `${prefix}.v1.`;
  if (!subject.startsWith(head)) return { kind: 'shared' };
  const rest = subject.slice(head.length);
  if (rest.startsWith('t.')) {
    const tenant = rest.slice(2, rest.indexOf('.', 2));
    // A malformed tenant once fell through to the shared space, where it saw and released
    // shared req_ids: refused instead.
    return TENANT_NAME.test(tenant) ? { kind: 'tenant', tenant } : { kind: 'invalid', tenant };
  }
  if (rest.startsWith('inst.')) return { kind: 'internal' };
  return { kind: 'shared' };
}
