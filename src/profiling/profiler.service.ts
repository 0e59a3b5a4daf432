import { Clock } from '../common/clock';
import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { ConfinedDir } from '../common/fs/confined-dir';
import { stateDir } from '../common/fs/state-dir';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import { ProfileControl, type ProfileReply } from './profile-control';
import type { ProfileRequest } from './profile.schema';

export type { ProfileRequest } from './profile.schema';

export type { ProfileReply } from './profile-control';

/** One profile from its claim to its file; `ready` settles once V8 is sampling (or failed to). */
interface Run {
  dir: string;
  prefix: string;
  id: string;
  stepsLeft?: number;
  session?: Session;
  ready: Promise<void>;
  stopping?: Promise<ProfileReply>;
}

/**
 * A private default root: the OS temp dir is world-writable, so anyone on the host could
 * plant a symlink there for a profile to follow.
 */
export function defaultProfileRoot(): string {
  return join(stateDir(), 'profiles');
}

/**
 * V8 CPU profiles of this worker through node:inspector, started and stopped over NATS or
 * HTTP (SGLang's start_profile / stop_profile). Files are
 * `{prefix}-rank{rank}-{id}.cpuprofile` (open them in Chrome DevTools or speedscope);
 * output_dir must lie under EPD_PROFILE_ROOT (default: a private per-user state dir), so a
 * remote caller cannot write anywhere else. `num_steps` stops after that many encodes.
 *
 * At most one profile runs: the slot is claimed synchronously, before the first await,
 * so concurrent starts cannot each open an inspector session (the leak that left 33
 * orphaned sessions sampling and RSS at 2.67 GB). Stop, num_steps and shutdown all end
 * that one run through `finish()`.
 */
@Injectable()
export class ProfilerService extends ProfileControl implements OnModuleDestroy {
  private readonly logger = new Logger('Profiler');
  /** The profile that is running: claimed, and not yet asked to stop. */
  private run?: Run;
  /** The profile being stopped and written, if any; a new one starts after it is done. */
  private closing?: Run;
  private root?: Promise<ConfinedDir>;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {
    super();
  }

  get running(): boolean {
    return this.run !== undefined;
  }

  /** Inspector sessions open right now: 0 or 1 (a test and a metric read it). */
  get sessions(): number {
    return (this.run?.session ? 1 : 0) + (this.closing?.session ? 1 : 0);
  }

  start(req: ProfileRequest): Promise<ProfileReply> {
    if (this.run) return Promise.reject(Errors.profilingRunning());
    const prefix = req.profile_prefix ?? 'encoder';
    if (!/^[A-Za-z0-9_.-]+$/.test(prefix))
      return Promise.reject(
        Errors.badRequest('profile_prefix may hold only letters, digits, _ . -'),
      );
    const run: Run = {
      dir: '',
      prefix,
      id: String(this.clock.now()),
      stepsLeft: req.num_steps,
      ready: Promise.resolve(),
    };
    this.run = run;
    run.ready = this.open(run, req.output_dir);
    return run.ready.then(
      () => {
        this.logger.log(
          { dir: run.dir, prefix, id: run.id, num_steps: req.num_steps },
          'profiling started',
        );
        return { ok: true, msg: `Start profiling. output_dir=${run.dir} profile_id=${run.id}` };
      },
      (err: unknown) => {
        if (this.run === run) this.run = undefined;
        run.session?.disconnect();
        throw err;
      },
    );
  }

  /** From the moment a stop begins the profile is no longer running: a second stop is a 400. */
  stop(): Promise<ProfileReply> {
    const run = this.run;
    if (!run) return Promise.reject(Errors.profilingNotRunning());
    this.run = undefined;
    this.closing = run;
    run.stopping = this.write(run);
    return run.stopping;
  }

  /** Called after each completed encode; stops a num_steps profile when it is due. */
  step(): void {
    const run = this.run;
    if (run?.stepsLeft === undefined) return;
    if (--run.stepsLeft <= 0) {
      this.stop().catch((err: unknown) =>
        this.logger.error({ err }, 'automatic profile stop failed'),
      );
    }
  }

  async onModuleDestroy(): Promise<void> {
    if (this.run) await this.stop().catch(() => undefined);
    await this.closing?.stopping?.catch(() => undefined);
  }

  private async open(run: Run, requested?: string): Promise<void> {
    // One inspector session at a time: wait for the previous profile's file to be written.
    await this.closing?.stopping?.catch(() => undefined);
    const root = await this.confinedRoot();
    const dir = root.resolve(requested, 'output_dir');
    await root.ensureDir(dir, 'output_dir');
    run.dir = dir;
    const session = new Session();
    session.connect();
    run.session = session;
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }

  private async write(run: Run): Promise<ProfileReply> {
    try {
      await run.ready.catch(() => undefined);
      const session = run.session;
      if (!session) throw Errors.profilingNotRunning();
      const { profile } = await session.post('Profiler.stop');
      const root = await this.confinedRoot();
      const name = `${run.prefix}-rank${this.config.encoder.dpRank}-${run.id}.cpuprofile`;
      // The directory is checked again now: it may have been swapped for a symlink since start.
      const file = await root.createFile(run.dir, name, 'output_dir');
      try {
        await file.writeFile(JSON.stringify(profile));
      } finally {
        await file.close();
      }
      const path = join(run.dir, name);
      this.logger.log({ path }, 'profiling stopped');
      return { ok: true, msg: `Stop profiling. ${path}`, path };
    } finally {
      run.session?.disconnect();
      run.session = undefined;
      if (this.closing === run) this.closing = undefined;
    }
  }

  private confinedRoot(): Promise<ConfinedDir> {
    this.root ??= ConfinedDir.open(
      this.config.profile.root || defaultProfileRoot(),
      'EPD_PROFILE_ROOT',
    ).catch((err: unknown) => {
      this.root = undefined; // not cached: the operator may fix the directory
      throw err;
    });
    return this.root;
  }
}
