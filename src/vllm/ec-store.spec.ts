import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Clock } from '../common/clock';
import { loadConfig } from '../config/config.loader';
import { mmHash, unsafeKeyReason } from './ec-keys';
import { EcStore } from './ec-store.service';
import { safetensorsHead } from './safetensors';

class FakeClock extends Clock {
  t = 1_000_000;
  override now(): number {
    return this.t;
  }
}

const MiB = 1 << 20;

function storeAt(path: string, clock: Clock, maxBytes = MiB): EcStore {
  const { config } = loadConfig({
    EPD_VLLM_EC_PATH: path,
    EPD_VLLM_MODEL_ID: 'm',
    EPD_VLLM_EC_TTL_S: '10',
    EPD_VLLM_EC_MAX_BYTES: String(maxBytes),
  });
  return new EcStore(config, clock);
}

describe('EcStore (vLLM EC files)', () => {
  let dir: string;
  let clock: FakeClock;
  let store: EcStore;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ec-store-'));
    clock = new FakeClock();
    store = storeAt(dir, clock);
    await store.onModuleInit();
  });
  afterEach(() => store.onModuleDestroy());

  const tensor = (kib: number) => new Uint8Array(kib * 1024);

  it('evicts least recently published files first when the byte budget is reached', async () => {
    await store.publish('a', 'bfloat16', [150, 1024], tensor(300));
    await store.publish('b', 'bfloat16', [150, 1024], tensor(300));
    await store.publish('c', 'bfloat16', [150, 1024], tensor(300));
    await store.publish('a', 'bfloat16', [150, 1024], tensor(300)); // a is recent again
    await store.publish('d', 'bfloat16', [150, 1024], tensor(300)); // needs room: b goes
    expect(readdirSync(dir).sort()).toEqual(['a', 'c', 'd']);
    expect(store.stats()).toMatchObject({ files: 3, evictions: { budget: 1, ttl: 0 } });
    expect(store.stats().bytes).toBeLessThanOrEqual(MiB);
  });

  it('refuses one embedding larger than the budget with 507, writing nothing', async () => {
    await expect(store.publish('big', 'float32', [300, 1024], tensor(1200))).rejects.toMatchObject({
      code: 507,
      type: 'ec_path_full',
    });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('expires files after the TTL and drains to zero, removing empty directories too', async () => {
    await store.publish('x', 'float16', [2, 4], tensor(1));
    await store.publish('y', 'float16', [2, 4], tensor(1));
    writeFileSync(join(dir, 'x', 'encoder_cache.safetensors.other'), ''); // not ours: x's dir stays
    clock.t += 10_001;
    await store.sweep();
    expect(store.stats()).toMatchObject({ files: 0, bytes: 0, writing: 0 });
    expect(existsSync(join(dir, 'y'))).toBe(false);
    expect(readdirSync(join(dir, 'x'))).toEqual(['encoder_cache.safetensors.other']);
  });

  it('adopts the files found at start, oldest first, and they expire like new ones', async () => {
    await store.publish('old', 'float16', [2, 4], tensor(1));
    const again = storeAt(dir, clock);
    await again.onModuleInit();
    expect(again.stats()).toMatchObject({ files: 1 });
    clock.t = Date.now() + 11_000; // adopted with the file's mtime
    await again.sweep();
    expect(again.stats().files).toBe(0);
    await again.onModuleDestroy();
  });

  it('a start with a path it cannot use stops, naming it', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const bad = storeAt(join(file, 'sub'), clock);
    await expect(bad.onModuleInit()).rejects.toThrow(
      /EPD_VLLM_EC_PATH .*a-file\/sub is not a writable directory/,
    );
  });
});

describe('safetensors head', () => {
  it('is the spec: u64 LE length, JSON padded with spaces to 8 bytes, offsets from 0', () => {
    const head = safetensorsHead('ec_cache', 'bfloat16', [3, 5], 30);
    const n = Number(head.readBigUInt64LE(0));
    expect(head.length).toBe(8 + n);
    expect(n % 8).toBe(0);
    expect(JSON.parse(head.subarray(8).toString('utf8'))).toEqual({
      ec_cache: { dtype: 'BF16', shape: [3, 5], data_offsets: [0, 30] },
    });
  });
});

describe('vLLM keys', () => {
  it('refuses keys that are not one safe path component', () => {
    for (const k of ['', '.', '..', 'a/b', 'a\\b', 'a\0b', '\n', '.x', 'é'.repeat(128)])
      expect(unsafeKeyReason(k)).toBeDefined();
    for (const k of ['abc', 'a.b', 'lora:0123abcd', 'x'.repeat(255), 'a-b_c'])
      expect(unsafeKeyReason(k)).toBeUndefined();
  });

  it('mm_hash with sha256 and sha512 matches the independent construction (test/interop/vllm_mm_hash.py)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mmhash-'));
    const file = join(dir, 'item');
    const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 7) & 0xff));
    writeFileSync(file, bytes);
    const python = execFileSync('sh', ['-c', 'command -p -v python3']).toString().trim();
    for (const algorithm of ['sha256', 'sha512'] as const) {
      for (const converted of [false, true]) {
        const golden = execFileSync(python, [
          'test/interop/vllm_mm_hash.py',
          file,
          'Qwen/Qwen2.5-VL-7B-Instruct',
          algorithm,
          converted ? 'converted' : 'plain',
        ])
          .toString()
          .trim();
        expect(mmHash(bytes, converted, 'Qwen/Qwen2.5-VL-7B-Instruct', algorithm)).toBe(golden);
      }
    }
  });
});
