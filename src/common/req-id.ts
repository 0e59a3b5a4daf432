/**
 * The `req_id` of a payload of unknown shape, if it is a string (for errors and logs).
 * An empty string is returned as is: error bodies echo the req_id exactly as it was
 * sent, as SGLang does (`""` stays `""`, it does not become null).
 */
export function reqIdOf(payload: unknown): string | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  const id = (payload as { req_id?: unknown }).req_id;
  return typeof id === 'string' ? id : undefined;
}
