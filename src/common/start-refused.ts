/**
 * A start that must not go on (a stand-in model not allowed, an execution provider not
 * installed, an EC path that cannot be written): main prints its message alone and exits
 * 78, as for a configuration error.
 */
export class StartRefusedError extends Error {
  override readonly name = 'StartRefusedError';
}
