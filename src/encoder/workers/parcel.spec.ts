import { once } from 'node:events';
import { runInNewContext } from 'node:vm';
import { receiveMessageOnPort } from 'node:worker_threads';
import {
  discard,
  giveBack,
  handOn,
  hold,
  isParcel,
  parcelChannel,
  parcelsHeld,
  ship,
  unpack,
} from './parcel';

// Not tested here, on purpose: receiveMessageOnPort on a port after close() segfaulted
// Node 20 (node -e, a closed MessageChannel port, then receiveMessageOnPort). unpack is
// only ever called once, on a port fresh from the main thread.

describe('parcel', () => {
  it('moves the values through the port without copying them in the sender', () => {
    const { send, receive } = parcelChannel();
    const values = Float32Array.from([1.5, -2, 3.25]);
    const left = ship(send, values);
    expect(values.length).toBe(0); // detached: moved, not copied
    expect(left.length).toBe(0);
    expect(Array.from(unpack({ port: receive }))).toEqual([1.5, -2, 3.25]);
  });

  it('gives the buffer back to its sender once read, and closes the parcel', async () => {
    const { send, receive } = parcelChannel();
    ship(send, Float32Array.from([4, 5]));
    const parcel = { port: receive };
    const read = unpack(parcel);
    const closed = once(send, 'close');
    giveBack(parcel, read);
    expect(read.length).toBe(0); // moved back, not copied
    expect(Array.from(receiveMessageOnPort(send)!.message as Float32Array)).toEqual([4, 5]);
    await closed;
    giveBack(new Float32Array(2), new Float32Array(2)); // no parcel: nothing to give back
  });

  it('passes values that are not in a parcel through as they are', () => {
    const values = new Float32Array(4);
    expect(unpack(values)).toBe(values);
    expect(isParcel(values)).toBe(false);
    // Arrays from another realm (piscina's, Jest's) are values too, not parcels.
    expect(isParcel(runInNewContext('new Float32Array(2)') as Float32Array)).toBe(false);
  });

  it('says so when a parcel holds nothing', () => {
    const { send, receive } = parcelChannel();
    send.close();
    expect(() => unpack({ port: receive })).toThrow(/parcel is empty/);
  });

  it('counts the parcels held until each is handed on or discarded, once', () => {
    const a = hold(parcelChannel().receive);
    const b = hold(parcelChannel().receive);
    expect(parcelsHeld()).toBe(2);
    const port = handOn(a);
    expect(port).toBe(a.port);
    expect(a.taken).toBe(true);
    discard(a); // already handed on: not counted twice
    discard(b);
    discard(b);
    expect(parcelsHeld()).toBe(0);
    discard({ port: parcelChannel().receive }); // never held: the count stays
    expect(parcelsHeld()).toBe(0);
  });

  it('discard closes the receiving end (its queued buffer is freed), and may be repeated', async () => {
    const { send, receive } = parcelChannel();
    ship(send, new Float32Array(1024));
    const closed = once(receive, 'close');
    discard({ port: receive });
    discard({ port: receive });
    discard(undefined);
    discard(new Float32Array(2)); // values: nothing to free
    await closed;
  });
});
