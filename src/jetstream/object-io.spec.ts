import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { ObjectIo } from './object-io';

/**
 * M6 of "Hardening, third pass": whoever may write a bucket writes its metadata too, and the
 * reader trusted it. A forged `chunks` made one read ask for every message of the stream at
 * once (+175 MB, the connection dropped as a slow consumer), and `size` was allocated
 * before any check. The layout is checked first: nothing is fetched or allocated for it.
 */
describe('ObjectIo.read checks the layout before it fetches or allocates', () => {
  const CHUNK = 512 * 1024;
  function io(info: Record<string, unknown>, metaSeq = 1_000_000) {
    const gets: unknown[] = [];
    const jsm = {
      direct: {
        getMessage: (_stream: string, q: Record<string, unknown>) => {
          gets.push(q);
          if ('last_by_subj' in q)
            return Promise.resolve({ seq: metaSeq, json: () => info, data: new Uint8Array(0) });
          return Promise.resolve({ seq: 1, subject: 'other', data: new Uint8Array(CHUNK) });
        },
      },
    } as unknown as JetStreamManager;
    return { io: new ObjectIo({} as JetStreamClient, jsm, CHUNK, 1000, 64 * 2 ** 20), gets };
  }
  const base = { nuid: 'n', size: 3 * CHUNK, chunks: 3, options: { max_chunk_size: CHUNK } };

  it.each([
    ['a chunk count the size does not give (the whole stream)', { chunks: 999_999 }],
    ['no chunk count', { chunks: undefined }],
    ['a size past any embedding this process stages', { size: 2 ** 40, chunks: 2 ** 21 }],
    ['a negative size', { size: -1, chunks: 0 }],
    ['a fractional size', { size: 1.5, chunks: 1 }],
    ['a chunk size no NATS server takes', { options: { max_chunk_size: 2 ** 30 } }],
  ])('%s: corrupt, and no chunk is asked for', async (_, forge) => {
    const { io: reader, gets } = io({ ...base, ...forge });
    await expect(reader.read('b', 'x')).rejects.toThrow(/corrupt object/);
    expect(gets).toHaveLength(1); // the metadata message only
  });

  it('reads a well-formed object', async () => {
    const { io: reader, gets } = io(base, 4);
    const read = await reader.read('b', 'x');
    expect(read?.bytes.length).toBe(3 * CHUNK);
    expect(gets.length).toBeGreaterThan(1);
  });
});
