import { MMError } from '../common/errors/mm-error';
import { parseEncodeRequest } from './encode-request.schema';

const valid = {
  req_id: 'r1',
  modality: 'IMAGE',
  mm_items: ['data:image/png;base64,AAAA'],
  num_parts: 2,
  part_idx: 1,
};

function message(body: unknown): string {
  try {
    parseEncodeRequest(body);
  } catch (e) {
    expect(e).toBeInstanceOf(MMError);
    expect((e as MMError).code).toBe(400);
    return (e as MMError).message;
  }
  throw new Error('expected a validation error');
}

describe('parseEncodeRequest (docs/contract.md §2 messages)', () => {
  it('accepts a valid request, lower-casing the modality and normalising items', () => {
    const r = parseEncodeRequest({
      ...valid,
      mm_items: ['a', { url: 'b', content_hash: 'ab'.repeat(32) }],
      extra: 1,
    });
    expect(r).toMatchObject({ req_id: 'r1', modality: 'image', num_parts: 2, part_idx: 1 });
    expect(r.mm_items).toEqual([{ url: 'a' }, { url: 'b', content_hash: 'ab'.repeat(32) }]);
  });

  it.each([
    [[1, 2], 'request is not a dict: list'],
    ['x', 'request is not a dict: str'],
    [null, 'request is not a dict: NoneType'],
    [7, 'request is not a dict: int'],
    [{ ...valid, req_id: undefined }, 'missing or invalid req_id'],
    [{ ...valid, req_id: '' }, 'missing or invalid req_id'],
    [{ ...valid, req_id: 5 }, 'missing or invalid req_id'],
    [{ ...valid, modality: undefined }, 'missing or invalid modality'],
    [{ ...valid, modality: 3 }, 'missing or invalid modality'],
    [{ ...valid, modality: 'Text' }, 'unsupported modality: Text'],
    [{ ...valid, mm_items: undefined }, 'missing or empty mm_items'],
    [{ ...valid, mm_items: null }, 'missing or empty mm_items'],
    [{ ...valid, mm_items: [] }, 'missing or empty mm_items'],
    [{ ...valid, num_parts: undefined }, 'num_parts must be a positive integer'],
    [{ ...valid, num_parts: 0 }, 'num_parts must be a positive integer'],
    [{ ...valid, num_parts: -1 }, 'num_parts must be a positive integer'],
    [{ ...valid, num_parts: 1.5 }, 'num_parts must be a positive integer'],
    [{ ...valid, num_parts: true }, 'num_parts must be a positive integer'],
    [{ ...valid, num_parts: '2' }, 'num_parts must be a positive integer'],
    [{ ...valid, part_idx: 2 }, 'part_idx must be in [0, 2)'],
    [{ ...valid, part_idx: -1 }, 'part_idx must be in [0, 2)'],
    [{ ...valid, part_idx: true }, 'part_idx must be in [0, 2)'],
    [{ ...valid, part_idx: undefined }, 'part_idx must be in [0, 2)'],
    [{ ...valid, hashes: { a: 1 } }, 'hashes must be list/scalar, got dict'],
    [{ ...valid, hashes: true }, 'hashes must be list/scalar, got bool'],
  ])('%j → %s', (body, expected) => {
    expect(message(body)).toBe(expected);
  });

  it('reports the first failure in SGLang’s order', () => {
    expect(message({ modality: 'x', mm_items: [], num_parts: 0 })).toBe(
      'missing or invalid req_id',
    );
    expect(message({ req_id: 'r', modality: 'x', mm_items: [], num_parts: 0 })).toBe(
      'unsupported modality: x',
    );
    expect(message({ req_id: 'r', modality: 'audio', mm_items: [], num_parts: 0 })).toBe(
      'missing or empty mm_items',
    );
  });

  it('accepts list and scalar hashes', () => {
    expect(() => parseEncodeRequest({ ...valid, hashes: ['h1'] })).not.toThrow();
    expect(() => parseEncodeRequest({ ...valid, hashes: 'h1' })).not.toThrow();
    expect(() => parseEncodeRequest({ ...valid, hashes: 12 })).not.toThrow();
  });

  it('names a bad item and carries the req_id', () => {
    let err: unknown;
    try {
      parseEncodeRequest({ ...valid, mm_items: ['ok', 5] });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({
      message:
        'mm_items[1]: each mm_items entry must be a non-empty string or an object with a url',
      reqId: 'r1',
    });
    expect(message({ ...valid, mm_items: [{ url: 'x', content_hash: 'nope' }] })).toMatch(
      /content_hash must be a sha256 hex digest/,
    );
  });
});
