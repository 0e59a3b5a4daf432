import { createHash, randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { Clock } from '../clock';

const digest = (s: string): string => createHash('sha256').update(s).digest('base64url');

/**
 * Dashboard sessions: what /admin/login hands out instead of the admin token itself (the
 * cookie used to be the token: not revocable, and a stolen cookie was the token). A
 * session id is 32 random bytes; only its hash is kept, with its expiry. Logout revokes
 * it. Bounded: at most MAX sessions (the oldest goes first), each for TTL_MS.
 */
@Injectable()
export class AdminSessions {
  static readonly TTL_MS = 12 * 3600 * 1000;
  static readonly MAX = 1_000;
  private readonly sessions = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  get size(): number {
    return this.sessions.size;
  }

  /** A new session id (the cookie's value). */
  create(): string {
    this.sweep();
    while (this.sessions.size >= AdminSessions.MAX)
      this.sessions.delete(this.sessions.keys().next().value!);
    const id = randomBytes(32).toString('base64url');
    this.sessions.set(digest(id), this.clock.now() + AdminSessions.TTL_MS);
    return id;
  }

  valid(id: string | undefined): boolean {
    if (!id) return false;
    const key = digest(id);
    const until = this.sessions.get(key);
    if (until === undefined) return false;
    if (until > this.clock.now()) return true;
    this.sessions.delete(key);
    return false;
  }

  revoke(id: string | undefined): void {
    if (id) this.sessions.delete(digest(id));
  }

  /** Drops expired sessions (they expire in creation order). */
  sweep(): void {
    const now = this.clock.now();
    for (const [key, until] of this.sessions) {
      if (until > now) break;
      this.sessions.delete(key);
    }
  }
}
