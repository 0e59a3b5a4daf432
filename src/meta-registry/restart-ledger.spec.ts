import { waitFor } from '../../test/support/wait';
import { Clock } from '../common/clock';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BOOT_ID } from '../common/boot-id';
import { RestartLedger } from './restart-ledger';
import { makeRegistry } from './testing';

/** The ledger file's contents, or undefined before it is first written. */
function ledgerFile(path: string): { boot: string; entries: unknown[] } | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as { boot: string; entries: unknown[] };
  } catch {
    return undefined;
  }
}

describe('RestartLedger', () => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-ledger-unit-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('gives the previous process entries still within their TTL, never its own', () => {
    const path = join(dir, 'a.json');
    const before = new RestartLedger(path, 'boot-1', 10, new Clock());
    before.start(
      () => [],
      () => undefined,
    );
    before.stop([
      ['held', 2_000],
      ['expired', 500],
    ]);
    expect(new RestartLedger(path, 'boot-2', 10, new Clock()).previous(1_000)).toEqual([
      ['held', 2_000],
    ]);
    expect(new RestartLedger(path, 'boot-1', 10, new Clock()).previous(1_000)).toEqual([]);
  });

  it('knows nothing from a missing or corrupt file, or from malformed entries', () => {
    expect(new RestartLedger(join(dir, 'none.json'), 'b', 10, new Clock()).previous(0)).toEqual([]);
    const corrupt = join(dir, 'corrupt.json');
    writeFileSync(corrupt, '{"boot":');
    expect(new RestartLedger(corrupt, 'b', 10, new Clock()).previous(0)).toEqual([]);
    const odd = join(dir, 'odd.json');
    writeFileSync(odd, JSON.stringify({ boot: 'a', entries: [['ok', 9], [1, 9], 'x', ['y']] }));
    expect(new RestartLedger(odd, 'b', 10, new Clock()).previous(0)).toEqual([['ok', 9]]);
  });

  // Not timed: the write runs on libuv's threads, which a loaded machine (CI, with other
  // work) delayed past a fixed 30 ms wait. It must come, with the change in it.
  it('rewrites the file after a change, on its interval timer', async () => {
    const path = join(dir, 'live.json');
    const ledger = new RestartLedger(path, 'boot-3', 5, new Clock());
    let held: [string, number][] = [];
    ledger.start(
      () => held,
      () => undefined,
    );
    held = [['r1', 99]];
    ledger.changed();
    await waitFor(async () => {
      await ledger.idle();
      return ledgerFile(path)?.entries.length === 1;
    });
    expect(ledgerFile(path)).toMatchObject({
      boot: 'boot-3',
      entries: [['r1', 99]],
    });
    ledger.stop([]);
    expect(ledgerFile(path)).toMatchObject({ entries: [] });
  });

  it('writes off the event loop, and a stop during such a write leaves its own contents, not the older ones', async () => {
    const path = join(dir, 'racing.json');
    let caught = false;
    for (let attempt = 0; attempt < 20 && !caught; attempt++) {
      const ledger = new RestartLedger(path, 'boot-4', 1, new Clock());
      let held: [string, number][] = [['old', 99]];
      ledger.start(
        () => held,
        () => undefined,
      );
      ledger.changed();
      // Wait for the timer to start a write, then stop while it is in flight.
      for (let i = 0; i < 200 && !caught; i++) {
        await new Promise((r) => setImmediate(r));
        caught = (ledger as unknown as { writing?: Promise<void> }).writing !== undefined;
      }
      held = [];
      ledger.stop([['final', 99]]);
      await ledger.idle();
      expect(ledgerFile(path)).toMatchObject({ entries: [['final', 99]] });
    }
    expect(caught).toBe(true);
  });

  it('is off, or named after the prefix and HTTP port under the state dir', () => {
    expect(RestartLedger.pathFor('off', 'epd', 8080)).toBeUndefined();
    expect(RestartLedger.pathFor('/x/l.json', 'epd', 8080)).toBe('/x/l.json');
    expect(RestartLedger.pathFor('', 'a.b*c', 80)).toMatch(/epd-encoder\/staged-a\.b_c-80\.json$/);
  });
});

describe('MetaRegistry with a restart ledger it cannot write', () => {
  it('starts all the same, and serves', async () => {
    // A directory under a regular file cannot be made.
    const { registry } = makeRegistry({ EPD_RESTART_LEDGER: '/dev/null/epd/staged.json' });
    expect(() => registry.onModuleInit()).not.toThrow();
    await registry.publish('r', { embedding_size: 4, embedding_len: 1, embedding_dim: 1 });
    expect(await registry.has('r')).toBe(true);
    registry.close();
  });
});

describe('MetaRegistry ledger, with metadata others published', () => {
  const dir = mkdtempSync(join(tmpdir(), 'epd-ledger-foreign-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const meta = { embedding_size: 4, embedding_len: 1, embedding_dim: 1 };
  /**
   * The file's entries once `done(entries)` holds: they are written on libuv's threads,
   * which a loaded machine delays past any fixed wait.
   */
  const entriesOnce = async (path: string, done: (entries: unknown[]) => boolean) => {
    await waitFor(() => done(ledgerFile(path)?.entries ?? []));
    return ledgerFile(path)?.entries;
  };

  it('is rewritten only when what this instance stages changes', async () => {
    // Found measuring the ledger's cost: every publish, anyone's, marked it dirty, and each rewrite
    // scanned every record (up to EPD_REGISTRY_MAX_ENTRIES, 1M) on the event loop.
    const path = join(dir, 'staged.json');
    const { registry } = makeRegistry({
      EPD_RESTART_LEDGER: path,
      EPD_INSTANCE_ID: 'me',
    });
    registry.onModuleInit();
    await registry.publish('mine', meta, 0, { instance: 'me', boot: BOOT_ID });
    expect(await entriesOnce(path, (e) => e.length === 1)).toEqual([['mine', expect.any(Number)]]);
    // Written, and nothing more to write: the count to compare with.
    const ledger = async () => (await registry.stats()).restartLedger!;
    await waitFor(async () => {
      const l = await ledger();
      return !l.pending_write && !l.writing;
    });
    const { writes } = await ledger();
    for (let i = 0; i < 2000; i++) await registry.publish(`theirs-${i}`, meta);
    await registry.publish('peer', meta, 0, { instance: 'someone-else', boot: 'b' });
    // A change marks the ledger at once, and each write is counted as it begins: not
    // marked and not written means not one of these publishes counted as a change.
    expect(await ledger()).toMatchObject({ writes, pending_write: false });
    // Ours going away is a change: released (discarded), then written again.
    await registry.discard('mine');
    expect(await entriesOnce(path, (e) => e.length === 0)).toEqual([]);
    registry.close();
  });
});
