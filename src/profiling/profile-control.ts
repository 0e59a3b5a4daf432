import type { ProfileRequest } from './profile.schema';

export interface ProfileReply {
  ok: boolean;
  msg: string;
  /** The written file, on stop. */
  path?: string;
}

/**
 * What start_profile / stop_profile act on: this process's V8 profiler, or, in a DP
 * supervisor, every worker's (one `dp_rank=N: …` line each). One controller serves both.
 */
export abstract class ProfileControl {
  abstract start(req: ProfileRequest): Promise<ProfileReply>;
  abstract stop(): Promise<ProfileReply>;
}
