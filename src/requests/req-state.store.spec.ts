import { Clock } from '../common/clock';
import { LifecycleEvents } from '../common/lifecycle-events';
import { loadConfig } from '../config/config.loader';
import { ReqStateStore } from './req-state.store';
import { stagedEmbedding } from './testing';
import { StagingSlab } from '../encoder/backend/staging-slab';

describe('ReqStateStore', () => {
  let store: ReqStateStore;
  let events: LifecycleEvents;
  const embedding = stagedEmbedding;

  beforeEach(() => {
    jest.useFakeTimers();
    const { config } = loadConfig({ EPD_STAGING_MAX_BYTES: '1000', EPD_SEND_TIMEOUT_MS: '5000' });
    events = new LifecycleEvents();
    store = new ReqStateStore(config, new Clock(), events);
  });
  afterEach(() => jest.useRealTimers());

  it('answers 409 to a second encode of an active req_id, and treats the id after release as new', () => {
    const s = store.begin('a', 'image', 0, 1);
    expect(() => store.begin('a', 'image', 0, 1)).toThrow(expect.objectContaining({ code: 409 }));
    store.finishEncode(s);
    expect(() => store.begin('a', 'image', 0, 1)).toThrow(expect.objectContaining({ code: 409 }));
    expect(store.release('a')).toBe('released');
    expect(() => store.begin('a', 'image', 0, 1)).not.toThrow();
  });

  it('counts reserved and staged bytes against the budget, 507 beyond it, and frees them on release', () => {
    const a = store.begin('a', 'image', 0, 1);
    store.reserve(a, 600);
    const b = store.begin('b', 'image', 0, 1);
    expect(() => store.reserve(b, 500)).toThrow(
      expect.objectContaining({
        code: 507,
        message: expect.stringContaining('need 500 bytes, 400 of 1000 free'),
      }),
    );
    store.reserve(b, 400);
    store.stage(a, embedding(592));
    expect(store.stats().usedBytes).toBe(992);
    store.finishEncode(a);
    store.finishEncode(b);
    store.release('a');
    store.release('b');
    expect(store.stats()).toMatchObject({ usedBytes: 0, states: 0, staged: 0 });
  });

  it('defers a release that arrives during the encode until the encode ends', () => {
    const s = store.begin('a', 'image', 0, 1);
    store.reserve(s, 100);
    expect(store.release('a')).toBe('deferred');
    expect(store.release('a')).toBe('deferred');
    expect(s.releaseRequested).toBe(true);
    store.finishEncode(s);
    expect(store.stats()).toMatchObject({ usedBytes: 0, states: 0 });
  });

  it('tells its listener when a deferred release is applied (the metadata goes then), and not for an immediate one', () => {
    const applied: string[] = [];
    events.on('release.deferred-applied', (id) => applied.push(id));
    const s = store.begin('a', 'image', 0, 1);
    expect(store.release('a')).toBe('deferred');
    expect(applied).toEqual([]);
    store.finishEncode(s);
    expect(applied).toEqual(['a']);
    store.finishEncode(store.begin('b', 'image', 0, 1));
    expect(store.release('b')).toBe('released');
    expect(applied).toEqual(['a']);
  });

  it('tells every listener, not only the last one added; a listener that throws stops none of the others', () => {
    // Reproduced: onEnded and onDeferredReleaseApplied (now these two events) kept one
    // listener each, so a second registration (a feature added later) silently dropped the
    // first (the handoff's deletion of taken-over objects, or the lifecycle's discard).
    const ended: string[] = [];
    const applied: string[] = [];
    events.on('request.ended', (id, reason) => ended.push(`first ${id} ${reason}`));
    events.on('request.ended', () => {
      throw new Error('a broken listener');
    });
    const removeThird = events.on('request.ended', (id) => ended.push(`third ${id}`));
    events.on('release.deferred-applied', (id) => applied.push(`first ${id}`));
    events.on('release.deferred-applied', (id) => applied.push(`second ${id}`));
    const s = store.begin('a', 'image', 0, 1);
    expect(store.release('a')).toBe('deferred');
    store.finishEncode(s);
    expect(applied).toEqual(['first a', 'second a']);
    expect(ended).toEqual(['first a explicit', 'third a']);
    removeThird();
    store.finishEncode(store.begin('b', 'image', 0, 1));
    store.release('b');
    expect(ended).toEqual(['first a explicit', 'third a', 'first b explicit']);
  });

  it("gives a staged embedding's slab slot back when its request ends", () => {
    const slab = new StagingSlab(4096);
    const slot = slab.alloc(592)!;
    const s = store.begin('a', 'image', 0, 1);
    store.stage(s, { ...embedding(592), slot });
    store.finishEncode(s);
    expect(slab.usage.slots).toBe(1);
    store.release('a');
    expect([slab.usage.slots, slot.freed]).toEqual([0, true]);
  });

  it('leaves a tombstone for a release before the encode; the encode then fails fast, once', () => {
    expect(store.release('early')).toBe('tombstoned');
    expect(store.release('early')).toBe('already-tombstoned');
    expect(() => store.begin('early', 'image', 0, 1)).toThrow(
      expect.objectContaining({ code: 409, message: 'Encoder request was released: early' }),
    );
    expect(store.stats().tombstones).toBe(0);
    expect(() => store.begin('early', 'image', 0, 1)).not.toThrow();
  });

  it('expires idle staged embeddings and tombstones after EPD_SEND_TIMEOUT_MS, never an active encode', () => {
    const staged = store.begin('staged', 'image', 0, 1);
    store.reserve(staged, 100);
    store.stage(staged, embedding(96));
    store.finishEncode(staged);
    const active = store.begin('active', 'image', 0, 1);
    store.release('ghost');
    jest.advanceTimersByTime(5001);
    expect(store.sweep()).toEqual(['staged']);
    expect(store.stats()).toMatchObject({ states: 1, usedBytes: 0, tombstones: 0 });
    store.finishEncode(active);
    jest.advanceTimersByTime(5001);
    expect(store.sweep()).toEqual(['active']);
    expect(store.stats().states).toBe(0);
  });

  it('adopts a handed-off embedding as staged, with its receive_count and acked destinations', () => {
    const ended: string[] = [];
    events.on('request.ended', (reqId, why) => ended.push(`${reqId}:${why}`));
    const s = store.adopt('h', 'image', 0, 1, embedding(400), 2, [{ host: '10.0.0.1', port: 9 }]);
    expect(s.phase).toBe('staged');
    expect(s.origin).toBe('object_store');
    expect(s.busy).toBe(false);
    expect(s.ackedCount).toBe(1);
    expect(s.complete).toBe(false);
    expect(store.stats().usedBytes).toBe(400);
    // The remaining receiver completes it: the release frees the bytes, and the handoff hears.
    expect(store.release('h', 'ack')).toBe('released');
    expect(store.stats().usedBytes).toBe(0);
    expect(ended).toEqual(['h:ack']);
  });

  it('refuses an adoption beyond the staging budget and leaves nothing behind', () => {
    expect(() => store.adopt('big', 'image', 0, 1, embedding(2000), 1, [])).toThrow(
      expect.objectContaining({ code: 507 }),
    );
    expect(store.stats()).toMatchObject({ states: 0, usedBytes: 0 });
  });

  it('hands a state off without a release: its bytes return, and the req_id is not remembered as released', () => {
    const ended: string[] = [];
    events.on('request.ended', (reqId) => ended.push(reqId));
    const s = store.begin('o', 'image', 0, 1);
    store.reserve(s, 400);
    store.stage(s, embedding(400));
    store.finishEncode(s);
    store.handOff(s);
    expect(store.stats()).toMatchObject({ states: 0, usedBytes: 0, recentlyReleased: 0 });
    expect(store.answersFor('o')).toBe(false);
    expect(s.phase).toBe('released');
    expect(ended).toEqual([]);
  });

  it('remembers a failed encode for late registrations, for the send TTL only, and drains to zero', () => {
    const s = store.begin('f', 'audio', 1, 2);
    store.rememberFailure(s, { message: 'x'.repeat(5000), code: 400 });
    store.discard(s);
    expect(store.failureOf('f')).toMatchObject({
      modality: 'audio',
      partIdx: 1,
      numParts: 2,
      code: 400,
    });
    expect(store.failureOf('f')!.message).toHaveLength(1024);
    expect(store.stats().recentFailures).toBe(1);
    // A new encode of the same id forgets the old failure.
    store.begin('f', 'image', 0, 1);
    expect(store.failureOf('f')).toBeUndefined();
    const g = store.begin('g', 'image', 0, 1);
    store.rememberFailure(g, { message: 'bad', code: 500 });
    jest.advanceTimersByTime(5001);
    expect(store.failureOf('g')).toBeUndefined();
    store.sweep();
    expect(store.stats().recentFailures).toBe(0);
  });
});
