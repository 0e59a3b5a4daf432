/**
 * A minimal Python pickler (protocol 2) for exactly the object graphs SGLang's receivers
 * unpickle: plain values, lists, tuples, dicts of str keys, module globals (a torch dtype,
 * `torch.tensor`), a global called with arguments (an Enum member, `torch.tensor([...])`),
 * and one instance of a class built from its `__dict__` (NEWOBJ + BUILD, which is how
 * pickle restores an object whose class has no `__setstate__`). No memo, no general
 * pickling: anything else is a programming error and throws.
 *
 * Opcodes used (pickletools names): PROTO, STOP, NONE, NEWTRUE, NEWFALSE, BININT1,
 * BININT2, BININT, LONG1, BINFLOAT, BINUNICODE, EMPTY_LIST, APPENDS, EMPTY_TUPLE,
 * TUPLE1-3, TUPLE, EMPTY_DICT, SETITEMS, MARK, GLOBAL, REDUCE, NEWOBJ, BUILD.
 */

/** `module.name`, pickled as GLOBAL: a class, a function or a module attribute. */
export class PyGlobal {
  constructor(
    readonly module: string,
    readonly name: string,
  ) {}
}

/** `callable(*args)`, pickled as GLOBAL, the args tuple, REDUCE. */
export class PyCall {
  constructor(
    readonly callable: PyGlobal,
    readonly args: readonly PyValue[],
  ) {}
}

/** An instance of `cls` whose `__dict__` is `state`: `cls.__new__(cls)` then BUILD. */
export class PyObject {
  constructor(
    readonly cls: PyGlobal,
    readonly state: ReadonlyMap<string, PyValue>,
  ) {}
}

/** A Python float (a JS number is pickled as an int when it is an integer). */
export class PyFloat {
  constructor(readonly value: number) {}
}

export class PyTuple {
  constructor(readonly items: readonly PyValue[]) {}
}

export type PyValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | PyFloat
  | PyTuple
  | PyGlobal
  | PyCall
  | PyObject
  | readonly PyValue[]
  | ReadonlyMap<string, PyValue>;

const OP = {
  PROTO: 0x80,
  STOP: 0x2e, // .
  NONE: 0x4e, // N
  NEWTRUE: 0x88,
  NEWFALSE: 0x89,
  BININT1: 0x4b, // K
  BININT2: 0x4d, // M
  BININT: 0x4a, // J
  LONG1: 0x8a,
  BINFLOAT: 0x47, // G
  BINUNICODE: 0x58, // X
  EMPTY_LIST: 0x5d, // ]
  APPENDS: 0x65, // e
  EMPTY_TUPLE: 0x29, // )
  TUPLE1: 0x85,
  TUPLE2: 0x86,
  TUPLE3: 0x87,
  TUPLE: 0x74, // t
  EMPTY_DICT: 0x7d, // }
  SETITEMS: 0x75, // u
  MARK: 0x28, // (
  GLOBAL: 0x63, // c
  REDUCE: 0x52, // R
  NEWOBJ: 0x81,
  BUILD: 0x62, // b
} as const;

/** Pickling in protocol 2 (readable by every Python 3). */
export function pickle(value: PyValue): Buffer {
  const out: Buffer[] = [Buffer.from([OP.PROTO, 2])];
  write(value, out);
  out.push(Buffer.from([OP.STOP]));
  return Buffer.concat(out);
}

function write(v: PyValue, out: Buffer[]): void {
  if (v === null) return void out.push(Buffer.from([OP.NONE]));
  if (v === true) return void out.push(Buffer.from([OP.NEWTRUE]));
  if (v === false) return void out.push(Buffer.from([OP.NEWFALSE]));
  if (typeof v === 'number') return writeNumber(v, out);
  if (typeof v === 'bigint') return writeLong(v, out);
  if (typeof v === 'string') return writeString(v, out);
  if (v instanceof PyFloat) return writeFloat(v.value, out);
  if (v instanceof PyTuple) return writeTuple(v.items, out);
  if (v instanceof PyGlobal) return writeGlobal(v, out);
  if (v instanceof PyCall) {
    writeGlobal(v.callable, out);
    writeTuple(v.args, out);
    return void out.push(Buffer.from([OP.REDUCE]));
  }
  if (v instanceof PyObject) {
    writeGlobal(v.cls, out);
    out.push(Buffer.from([OP.EMPTY_TUPLE, OP.NEWOBJ]));
    writeDict(v.state, out);
    return void out.push(Buffer.from([OP.BUILD]));
  }
  if (v instanceof Map) return writeDict(v, out);
  if (Array.isArray(v)) return writeList(v, out);
  throw new TypeError(`cannot pickle ${Object.prototype.toString.call(v)}`);
}

function writeNumber(n: number, out: Buffer[]): void {
  if (!Number.isFinite(n)) throw new TypeError(`cannot pickle ${n} as an int (use PyFloat)`);
  if (!Number.isInteger(n)) return writeFloat(n, out);
  if (n >= 0 && n < 0x100) return void out.push(Buffer.from([OP.BININT1, n]));
  if (n >= 0 && n < 0x10000) {
    const b = Buffer.alloc(3);
    b[0] = OP.BININT2;
    b.writeUInt16LE(n, 1);
    return void out.push(b);
  }
  if (n >= -0x80000000 && n <= 0x7fffffff) {
    const b = Buffer.alloc(5);
    b[0] = OP.BININT;
    b.writeInt32LE(n, 1);
    return void out.push(b);
  }
  writeLong(BigInt(n), out);
}

/** LONG1: little-endian two's complement, as few bytes as hold the sign. */
function writeLong(n: bigint, out: Buffer[]): void {
  const bytes: number[] = [];
  let x = n;
  for (;;) {
    const byte = Number(x & 0xffn);
    bytes.push(byte);
    x >>= 8n; // arithmetic shift keeps the sign
    const signBit = (byte & 0x80) !== 0;
    if ((x === 0n && !signBit) || (x === -1n && signBit)) break;
  }
  if (bytes.length > 255) throw new RangeError('integer too large for LONG1');
  out.push(Buffer.from([OP.LONG1, bytes.length, ...bytes]));
}

function writeFloat(x: number, out: Buffer[]): void {
  const b = Buffer.alloc(9);
  b[0] = OP.BINFLOAT;
  b.writeDoubleBE(x, 1);
  out.push(b);
}

function writeString(s: string, out: Buffer[]): void {
  const utf8 = Buffer.from(s, 'utf8');
  const head = Buffer.alloc(5);
  head[0] = OP.BINUNICODE;
  head.writeUInt32LE(utf8.length, 1);
  out.push(head, utf8);
}

function writeGlobal(g: PyGlobal, out: Buffer[]): void {
  for (const part of [g.module, g.name]) {
    if (!/^[A-Za-z_][\w.]*$/.test(part)) throw new TypeError(`bad global name ${part}`);
  }
  out.push(Buffer.from([OP.GLOBAL]), Buffer.from(`${g.module}\n${g.name}\n`, 'ascii'));
}

function writeTuple(items: readonly PyValue[], out: Buffer[]): void {
  if (items.length === 0) return void out.push(Buffer.from([OP.EMPTY_TUPLE]));
  if (items.length <= 3) {
    for (const item of items) write(item, out);
    return void out.push(Buffer.from([[OP.TUPLE1, OP.TUPLE2, OP.TUPLE3][items.length - 1]!]));
  }
  out.push(Buffer.from([OP.MARK]));
  for (const item of items) write(item, out);
  out.push(Buffer.from([OP.TUPLE]));
}

function writeList(items: readonly PyValue[], out: Buffer[]): void {
  out.push(Buffer.from([OP.EMPTY_LIST]));
  if (items.length === 0) return;
  out.push(Buffer.from([OP.MARK]));
  for (const item of items) write(item, out);
  out.push(Buffer.from([OP.APPENDS]));
}

function writeDict(map: ReadonlyMap<string, PyValue>, out: Buffer[]): void {
  out.push(Buffer.from([OP.EMPTY_DICT]));
  if (map.size === 0) return;
  out.push(Buffer.from([OP.MARK]));
  for (const [k, v] of map) {
    writeString(k, out);
    write(v, out);
  }
  out.push(Buffer.from([OP.SETITEMS]));
}
