/**
 * A tenant's req_ids inside the service (docs/threat-model.md): R sent through tenant T's
 * subjects is `T/R` in request state, metadata, staging and the cache's keys, and R again
 * in every reply and data-plane frame. Shared-space req_ids may not contain the separator,
 * so no caller outside a tenant can name one of its req_ids. The subjects that carry a
 * tenant are the transport's (transport/tenant-scope.ts).
 */

/** Between a tenant and the caller's req_id in the inner form. */
export const TENANT_SEP = '/';

/** The inner req_id of `reqId` sent by `tenant`. */
export function scopedReqId(tenant: string, reqId: string): string {
  return `${tenant}${TENANT_SEP}${reqId}`;
}

/** The tenant an inner req_id belongs to; undefined in the shared space. */
export function tenantOf(reqId: string): string | undefined {
  const i = reqId.indexOf(TENANT_SEP);
  return i > 0 ? reqId.slice(0, i) : undefined;
}

/** The req_id as its caller named it: what replies and data-plane frames carry. */
export function publicReqId(reqId: string): string {
  const i = reqId.indexOf(TENANT_SEP);
  return i > 0 ? reqId.slice(i + 1) : reqId;
}

/** Why a shared-space req_id is refused; undefined when it is fine. */
export function sharedReqIdProblem(reqId: unknown): string | undefined {
  return typeof reqId === 'string' && reqId.includes(TENANT_SEP)
    ? `req_id may not contain "${TENANT_SEP}" (it separates a tenant from its req_ids)`
    : undefined;
}

/**
 * `text` (a reply, an error message) with every mention of the inner req_id `inner` turned
 * back into the caller's; as is for a shared-space req_id. JSON-escaped either way.
 */
export function unscopeReply(text: string, inner: string): string {
  const outer = publicReqId(inner);
  if (outer === inner) return text;
  const from = JSON.stringify(inner).slice(1, -1);
  return text.includes(from) ? text.split(from).join(JSON.stringify(outer).slice(1, -1)) : text;
}
