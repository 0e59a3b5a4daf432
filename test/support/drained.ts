/**
 * Whether the service at `url` holds nothing any more: no registry entries or waiters,
 * no request state, no staging bytes, no encode pending, no model input parked, no
 * staging slab slot in use.
 */
export async function drained(url: string): Promise<boolean> {
  const registry = (await (await fetch(`${url}/admin/registry`)).json()) as {
    entries: number;
    waiters: number;
  };
  const requests = (await (await fetch(`${url}/admin/requests`)).json()) as {
    staging: { usedBytes: number };
    requests: unknown[];
    pending: number;
    model_inputs_held: number;
    staging_slab: { usedBytes: number; slots: number };
  };
  return (
    registry.entries === 0 &&
    registry.waiters === 0 &&
    requests.staging.usedBytes === 0 &&
    requests.requests.length === 0 &&
    requests.pending === 0 &&
    requests.model_inputs_held === 0 &&
    requests.staging_slab.usedBytes === 0 &&
    requests.staging_slab.slots === 0
  );
}
