import { randomBytes } from 'node:crypto';

/**
 * This process's start, as an id: recorded with the metadata it publishes, so that after
 * a restart (same EPD_INSTANCE_ID, maybe even the same pid, as PID 1 in a container) a
 * call for an embedding the previous process held is told it was lost.
 */
export const BOOT_ID = randomBytes(6).toString('hex');
