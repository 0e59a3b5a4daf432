import { ReqState } from './req-state';
import { stagedEmbedding as emb } from './testing';
const at = (port: number) => ({ host: '127.0.0.1', port });

describe('ReqState transitions', () => {
  it('goes encoding → staged → released, and settles `ready` on stage', async () => {
    const s = new ReqState('a', 'image', 0, 1, 0);
    expect(s.phase).toBe('encoding');
    s.reserve(64);
    expect(s.stage(emb(48), 5)).toBe(-16);
    await expect(s.ready).resolves.toBeUndefined();
    expect(s).toMatchObject({ phase: 'staged', heldBytes: 48, lastUsedAt: 5 });
    expect(s.endEncode()).toBe(false);
    expect(s.requestRelease('explicit')).toBe('now');
    expect(s.end()).toBe(48);
    expect(s).toMatchObject({ phase: 'released', heldBytes: 0, embedding: undefined });
  });

  it('refuses transitions its phase does not allow', () => {
    const s = new ReqState('a', 'image', 0, 1, 0);
    s.stage(emb(16), 1);
    expect(() => s.stage(emb(16), 2)).toThrow('stage not allowed in staged');
    expect(() => s.reserve(16)).toThrow('reserve not allowed in staged');
    s.end();
    expect(() => s.end()).toThrow('end not allowed in released');
    expect(() => s.addDestination(at(1), 'send')).toThrow('addDestination not allowed');
  });

  it('rejects `ready` when it ends before staging', async () => {
    const s = new ReqState('gone', 'image', 0, 1, 0);
    s.end();
    await expect(s.ready).rejects.toThrow('Encoder request was released: gone');
  });

  it('defers a release while an encode or a send runs, and reports it due when the last ends', () => {
    const s = new ReqState('a', 'image', 0, 1, 0);
    s.stage(emb(16), 1);
    s.expectReceivers(2);
    const d = s.addDestination(at(1), 'send');
    s.startSend(d);
    expect(s.requestRelease('explicit')).toBe('deferred');
    expect(s.phase).toBe('release-pending');
    expect(s.endEncode()).toBe(false); // a send still runs
    expect(s.ack(d, 16, 9)).toBe(true);
    expect(s.destinations.get('127.0.0.1:1')).toMatchObject({
      status: 'acked',
      deliveries: 1,
      bytes: 16,
    });
    expect(s.lastUsedAt).toBe(9);
  });

  it('counts completion per distinct destination and bounds them by receive_count', () => {
    const s = new ReqState('a', 'image', 0, 1, 0);
    s.expectReceivers(2);
    expect(() => s.expectReceivers(3)).toThrow(expect.objectContaining({ code: 400 }));
    const a = s.addDestination(at(1), 'registered');
    expect(s.addDestination(at(1), 'send')).toBe(a);
    const b = s.addDestination(at(2), 'send');
    expect(() => s.addDestination(at(3), 'send')).toThrow(expect.objectContaining({ code: 400 }));
    s.startSend(a);
    s.ack(a, 16, 1);
    s.startSend(a);
    s.ack(a, 16, 2); // a retry from the same destination is not counted twice
    expect(s.complete).toBe(false);
    s.startSend(b);
    s.fail(b, 'connection refused', 3);
    expect(s.destinations.get('127.0.0.1:2')).toMatchObject({
      status: 'failed',
      error: 'connection refused',
    });
    s.startSend(b);
    s.ack(b, 16, 4);
    expect(s.complete).toBe(true);
  });

  it('only changes destinations it owns', () => {
    const s = new ReqState('a', 'image', 0, 1, 0);
    const other = new ReqState('b', 'image', 0, 1, 0).addDestination(at(1), 'send');
    expect(() => s.startSend(other)).toThrow("is not one of a's");
  });

  it('is idle for the sweep only when nothing runs for it', () => {
    const s = new ReqState('a', 'image', 0, 1, 0);
    expect(s.idleFor(10_000, 100)).toBe(false); // encoding
    s.endEncode();
    expect(s.idleFor(10_000, 100)).toBe(true);
    const d = s.addDestination(at(1), 'send');
    s.startSend(d);
    expect(s.idleFor(10_000, 100)).toBe(false);
  });
});
