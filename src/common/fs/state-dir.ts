import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * This service's private state directory: `$XDG_STATE_HOME/epd-encoder` (by default
 * `~/.local/state/epd-encoder`), for profiles and the restart ledger. Not the OS temp dir,
 * which anyone on the host can write to.
 */
export function stateDir(): string {
  const state = process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(state, 'epd-encoder');
}
