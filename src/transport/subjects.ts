/** Every dp_type the service answers on NATS (docs/contract.md §1). */
export const DpType = {
  Encode: 'encode',
  PublishMetadata: 'publish_metadata',
  WaitMetadata: 'wait_metadata',
  HasMetadata: 'has_metadata',
  RegisterDestinations: 'register_destinations',
  Send: 'send',
  SendStatus: 'send_status',
  Release: 'release',
  HealthEncode: 'health_encode',
  StartProfile: 'start_profile',
  StopProfile: 'stop_profile',
  Stats: 'stats',
} as const;
export type DpType = (typeof DpType)[keyof typeof DpType];

/** `<prefix>.v1.<dp_type>`: served by a queue group shared by every replica. */
export function subjectFor(prefix: string, dpType: string): string {
  return `${prefix}.v1.${dpType}`;
}

/** `<prefix>.v1.rank.<N>.<dp_type>`: addressed to one DP worker. */
export function rankSubjectFor(prefix: string, rank: number, dpType: string): string {
  return `${prefix}.v1.rank.${rank}.${dpType}`;
}

/** `<prefix>.v1.inst.<id>.<dp_type>`: addressed to one instance (owner routing). */
export function instanceSubjectFor(prefix: string, instanceId: string, dpType: string): string {
  return `${prefix}.v1.inst.${instanceId}.${dpType}`;
}

/**
 * `<prefix>.v1.inst.<id>.rank.<N>.<dp_type>`: one DP worker of one instance. Its
 * supervisor dispatches here; unlike the plain rank subject it is unambiguous when
 * several instances run DP workers on one NATS.
 */
export function instanceRankSubjectFor(
  prefix: string,
  instanceId: string,
  rank: number,
  dpType: string,
): string {
  return `${prefix}.v1.inst.${instanceId}.rank.${rank}.${dpType}`;
}

/** Whether a message arrived on an instance subject, i.e. was forwarded here by a peer. */
export function isInstanceSubject(subject: string): boolean {
  return subject.includes('.v1.inst.');
}

/**
 * `<prefix>.v1.inst.<id>[.rank.<N>].cache_fetch`: where one encoding process (a single
 * process, or DP worker N) serves the embeddings it caches or is encoding to the
 * processes that joined its claim (cluster-wide single flight). Not a Nest pattern: the
 * reply is a stream (size first, then the rows in binary chunks).
 */
export function cacheFetchSubject(prefix: string, instanceId: string, rank?: number): string {
  const inst = `${prefix}.v1.inst.${instanceId}`;
  return rank === undefined ? `${inst}.cache_fetch` : `${inst}.rank.${rank}.cache_fetch`;
}
