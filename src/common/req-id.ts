/** The `req_id` of a payload of unknown shape, if it has a non-empty one (for errors and logs). */
export function reqIdOf(payload: unknown): string | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  const id = (payload as { req_id?: unknown }).req_id;
  return typeof id === 'string' && id.length > 0 ? id : undefined;
}
