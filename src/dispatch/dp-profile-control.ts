import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { ProfileControl, type ProfileReply } from '../profiling/profile-control';
import type { ProfileRequest } from '../profiling/profile.schema';
import { DpType } from '../transport/subjects';
import { DpDispatcher, mergeRankAnswers } from './dp-dispatcher.service';

/** start_profile / stop_profile on every alive worker: a `dp_rank=N: …` line each. */
@Injectable()
export class DpProfileControl extends ProfileControl {
  constructor(
    private readonly dispatcher: DpDispatcher,
    private readonly config: AppConfig,
  ) {
    super();
  }

  start(req: ProfileRequest): Promise<ProfileReply> {
    return this.broadcast(DpType.StartProfile, req);
  }

  stop(): Promise<ProfileReply> {
    return this.broadcast(DpType.StopProfile, {});
  }

  private async broadcast(dp: DpType, body: object): Promise<ProfileReply> {
    const timeoutMs = this.config.encoder.probeTimeoutMs;
    const answers = await this.dispatcher.broadcast<ProfileReply>(dp, body, timeoutMs);
    return { ok: true, msg: mergeRankAnswers(answers, (r) => r.msg.trimEnd()) };
  }
}
