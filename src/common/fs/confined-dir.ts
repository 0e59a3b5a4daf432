import { constants } from 'node:fs';
import { lstat, mkdir, open, realpath, type FileHandle } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { Errors } from '../errors/error-catalogue';
import type { MMError } from '../errors/mm-error';

/** Longest name of one path component on Linux (NAME_MAX), in bytes. */
const NAME_MAX = 255;
/** Longest path the kernel accepts (PATH_MAX), in bytes. */
const PATH_MAX = 4096;

/**
 * Checks a caller-supplied path before any filesystem call sees it: NUL bytes and
 * over-long names are a 400 that names the problem, not an ERR_INVALID_ARG_VALUE or
 * ENAMETOOLONG that would surface as a 500.
 */
export function checkPathString(value: string, what: string): void {
  if (value.includes('\0')) throw Errors.badRequest(`${what} must not contain NUL bytes`);
  if (Buffer.byteLength(value) > PATH_MAX)
    throw Errors.badRequest(`${what} is longer than ${PATH_MAX} bytes`);
  for (const part of value.split('/')) {
    if (Buffer.byteLength(part) > NAME_MAX)
      throw Errors.badRequest(`${what} has a component longer than ${NAME_MAX} bytes`);
  }
}

/**
 * A directory that remote callers may write under, and nothing outside it.
 *
 * Paths below the root are created one component at a time, and each component is
 * checked with lstat: a symlink anywhere below the root is refused instead of followed,
 * so no directory is ever created outside the root (the old mkdir-then-realpath order
 * created `evil_link/x` outside before refusing it). Files are opened with O_NOFOLLOW and
 * O_EXCL after the same walk is repeated, so a symlink swapped in between checking a
 * directory and writing to it is refused too.
 */
export class ConfinedDir {
  private constructor(
    readonly root: string,
    private readonly variable: string,
  ) {}

  /** Resolves the root (an operator's path may itself be a symlink) and creates it 0700 when missing. */
  static async open(root: string, variable: string): Promise<ConfinedDir> {
    await mkdir(root, { recursive: true, mode: 0o700 });
    return new ConfinedDir(await realpath(root), variable);
  }

  /** The absolute, lexically normalised path of `requested` if it lies under the root. */
  resolve(requested: string | undefined, what: string): string {
    if (requested === undefined) return this.root;
    checkPathString(requested, what);
    const path = isAbsolute(requested) ? resolve(requested) : resolve(this.root, requested);
    if (path !== this.root && !path.startsWith(this.root + sep)) throw this.outside(what);
    return path;
  }

  /** Creates `dir` (from resolve()) and its parents below the root, following no symlink. */
  async ensureDir(dir: string, what: string): Promise<void> {
    let current = this.root;
    for (const part of this.parts(dir)) {
      current = join(current, part);
      try {
        await mkdir(current, { mode: 0o700 });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const info = await lstat(current);
      if (info.isSymbolicLink() || !info.isDirectory()) {
        throw Errors.badRequest(
          `${what} must be a directory under ${this.root} (${this.variable}), not a symlink`,
        );
      }
    }
  }

  /** Creates a new file in `dir`, re-checking the directory chain and refusing symlinks. */
  async createFile(dir: string, name: string, what: string): Promise<FileHandle> {
    await this.ensureDir(dir, what);
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    return open(join(dir, name), flags, 0o600);
  }

  private parts(dir: string): string[] {
    const rel = relative(this.root, dir);
    return rel === '' ? [] : rel.split(sep);
  }

  private outside(what: string): MMError {
    return Errors.badRequest(`${what} must be under ${this.root} (${this.variable})`);
  }
}
