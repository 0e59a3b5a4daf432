import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { mkdir, realpath, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve, sep } from 'node:path';
import { Errors } from '../common/errors/error-catalogue';
import { BadRequestError } from '../common/errors/mm-error';
import { AppConfig } from '../config/app-config';

export interface ProfileRequest {
  output_dir?: string;
  profile_prefix?: string;
  num_steps?: number;
}

export interface ProfileReply {
  ok: boolean;
  msg: string;
  /** The written file, on stop. */
  path?: string;
}

/**
 * V8 CPU profiles of this worker through node:inspector, started and stopped over NATS or
 * HTTP (SGLang's start_profile / stop_profile). Files are
 * `{prefix}-rank{rank}-{id}.cpuprofile` (open them in Chrome DevTools or speedscope);
 * output_dir must lie under EPD_PROFILE_ROOT (default: the OS temp dir), so a remote
 * caller cannot write anywhere else. `num_steps` stops after that many encodes.
 */
@Injectable()
export class ProfilerService implements OnModuleDestroy {
  private readonly logger = new Logger('Profiler');
  private session?: Session;
  private current?: { dir: string; prefix: string; id: string; stepsLeft?: number };

  constructor(private readonly config: AppConfig) {}

  get running(): boolean {
    return this.current !== undefined;
  }

  async start(req: ProfileRequest): Promise<ProfileReply> {
    if (this.current) throw Errors.profilingRunning();
    const dir = await this.outputDir(req.output_dir);
    const prefix = req.profile_prefix ?? 'encoder';
    if (!/^[A-Za-z0-9_.-]+$/.test(prefix))
      throw new BadRequestError('profile_prefix may hold only letters, digits, _ . -');
    const id = String(Date.now());
    this.current = { dir, prefix, id, stepsLeft: req.num_steps };
    try {
      this.session = new Session();
      this.session.connect();
      await this.session.post('Profiler.enable');
      await this.session.post('Profiler.start');
    } catch (err) {
      this.current = undefined;
      this.session?.disconnect();
      throw err;
    }
    this.logger.log({ dir, prefix, id, num_steps: req.num_steps }, 'profiling started');
    return { ok: true, msg: `Start profiling. output_dir=${dir} profile_id=${id}` };
  }

  async stop(): Promise<ProfileReply> {
    const current = this.current;
    const session = this.session;
    if (!current || !session) throw Errors.profilingNotRunning();
    this.current = undefined;
    this.session = undefined;
    try {
      const { profile } = await session.post('Profiler.stop');
      const path = join(
        current.dir,
        `${current.prefix}-rank${this.config.encoder.dpRank}-${current.id}.cpuprofile`,
      );
      await writeFile(path, JSON.stringify(profile));
      this.logger.log({ path }, 'profiling stopped');
      return { ok: true, msg: `Stop profiling. ${path}`, path };
    } finally {
      session.disconnect();
    }
  }

  /** Called after each completed encode; stops a num_steps profile when it is due. */
  step(): void {
    const current = this.current;
    if (current?.stepsLeft === undefined) return;
    if (--current.stepsLeft <= 0) {
      this.stop().catch((err: unknown) =>
        this.logger.error({ err }, 'automatic profile stop failed'),
      );
    }
  }

  async onModuleDestroy(): Promise<void> {
    if (this.current) await this.stop().catch(() => undefined);
  }

  private async outputDir(requested?: string): Promise<string> {
    const root = await realpath(this.config.profile.root || tmpdir());
    if (!requested) return root;
    const inside = (p: string) => p === root || p.startsWith(root + sep);
    const refuse = () => new BadRequestError(`output_dir must be under ${root} (EPD_PROFILE_ROOT)`);
    const dir = isAbsolute(requested) ? resolve(requested) : resolve(root, requested);
    if (!inside(dir)) throw refuse();
    await mkdir(dir, { recursive: true });
    // Again after resolving symlinks, which the lexical check cannot see.
    const real = await realpath(dir);
    if (!inside(real)) throw refuse();
    return real;
  }
}
