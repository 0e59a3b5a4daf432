import { EventEmitter } from 'node:events';
import { MMError } from '../common/errors/mm-error';
import { IpcChannel, type IpcPeer } from './ipc-channel';
import type { IpcTopic } from './ipc-topics';

/** Any topic, any payload: the channel's mechanics, not the service's topics. */
type Loose = Record<string, IpcTopic<unknown, unknown>>;

/** Two connected IPC ends, delivering asynchronously as Node's channel does. */
type End = EventEmitter & IpcPeer & { connected: boolean };

function pair(): [End, End] {
  const a = new EventEmitter() as End;
  const b = new EventEmitter() as End;
  a.connected = b.connected = true;
  const wire = (from: End, to: End) => {
    from.send = (m, cb) => {
      if (!from.connected) throw new Error('ERR_IPC_CHANNEL_CLOSED');
      setImmediate(() => {
        to.emit('message', structuredClone(m));
        cb?.(null);
      });
      return true;
    };
  };
  wire(a, b);
  wire(b, a);
  return [a, b];
}

describe('IpcChannel', () => {
  it('rethrows a handler MMError as the same MMError (status, type, req_id)', async () => {
    const [a, b] = pair();
    const parent = new IpcChannel<Loose>(a);
    new IpcChannel<Loose>(b).handle('encode', () => {
      throw new MMError('encode already active for req_id=r', 409, 'r', 'duplicate_request');
    });
    await expect(parent.request('encode', {}, 1000)).rejects.toMatchObject({
      name: 'MMError',
      code: 409,
      type: 'duplicate_request',
      reqId: 'r',
      message: 'encode already active for req_id=r',
    });
  });

  it('answers a request with the handler value, or its error', async () => {
    const [a, b] = pair();
    const parent = new IpcChannel<Loose>(a);
    const child = new IpcChannel<Loose>(b);
    child.handle('stats', () => ({ pending: 3 }));
    child.handle('boom', () => {
      throw new Error('no stats here');
    });
    await expect(parent.request('stats', undefined, 1000)).resolves.toEqual({ pending: 3 });
    await expect(parent.request('boom', undefined, 1000)).rejects.toThrow('no stats here');
    await expect(parent.request('nobody', undefined, 1000)).rejects.toThrow(
      'no IPC handler for nobody',
    );
    expect(parent.pendingCount).toBe(0);
  });

  it('delivers notifications and ignores messages that are not its envelopes', async () => {
    const [a, b] = pair();
    const parent = new IpcChannel<Loose>(a);
    const child = new IpcChannel<Loose>(b);
    const got: unknown[] = [];
    parent.handle('ready', (p) => void got.push(p));
    b.emit('message', 'not an envelope');
    child.notify('ready', { pid: 7 });
    // After the wire's own setImmediate, deterministically (a 10 ms timer could fire first
    // on a machine that stalled this process for as long).
    await new Promise((r) => setImmediate(r));
    expect(got).toEqual([{ pid: 7 }]);
  });

  it('times out a request that gets no answer, and drains back to zero', async () => {
    const [a] = pair();
    const parent = new IpcChannel<Loose>(a); // nobody listens on the other end
    await expect(parent.request('stats', undefined, 20)).rejects.toThrow(
      'IPC stats got no answer within 20 ms',
    );
    expect(parent.pendingCount).toBe(0);
  });

  it('fails every pending request when closed, and refuses new ones', async () => {
    const [a] = pair();
    const parent = new IpcChannel<Loose>(a);
    const calls = [1, 2, 3].map(() => parent.request('stats', undefined, 10_000));
    parent.close('worker died');
    for (const c of calls) await expect(c).rejects.toThrow('worker died');
    await expect(parent.request('stats', undefined, 1000)).rejects.toThrow('IPC channel closed');
    expect(parent.pendingCount).toBe(0);
  });

  it('fails a request at once when the channel is already disconnected', async () => {
    const [a] = pair();
    a.connected = false;
    const parent = new IpcChannel<Loose>(a);
    await expect(parent.request('stats', undefined, 10_000)).rejects.toThrow(
      'ERR_IPC_CHANNEL_CLOSED',
    );
    expect(parent.pendingCount).toBe(0);
  });

  it('bounds the requests in flight', async () => {
    const [a] = pair();
    const parent = new IpcChannel<Loose>(a, 2);
    const held = [parent.request('x', undefined, 10_000), parent.request('x', undefined, 10_000)];
    await expect(parent.request('x', undefined, 10_000)).rejects.toThrow(
      'IPC channel has 2 calls pending',
    );
    parent.close('done');
    await Promise.allSettled(held);
  });

  it("the service's topics are typed at both ends (tsc fails on a wrong name or reply)", () => {
    const channel = new IpcChannel({ on: () => undefined, off: () => undefined });
    // @ts-expect-error: no such topic
    channel.handle('no_such_topic', () => 1);
    // @ts-expect-error: cache_purge answers { purged: number }
    channel.handle('cache_purge', () => ({ purged: 'all' }));
    channel.handle('cache_purge', () => ({ purged: 0 }));
    channel.close('done');
  });
});
