import { pickle, PyCall, PyFloat, PyGlobal, PyObject, PyTuple, type PyValue } from './pickle';

/**
 * One case per opcode path. Each expected byte string was checked once with CPython's
 * `pickle.loads` (the value in the comment is what it returned); the interop e2e test
 * unpickles real frames with the restricted unpickler on every CI run.
 */
const cases: [name: string, value: PyValue, hex: string, python: string][] = [
  ['NONE', null, '80024e2e', 'None'],
  ['NEWTRUE', true, '8002882e', 'True'],
  ['NEWFALSE', false, '8002892e', 'False'],
  ['BININT1', 5, '80024b052e', '5'],
  ['BININT2', 300, '80024d2c012e', '300'],
  ['BININT', 70000, '80024a701101002e', '70000'],
  ['BININT negative', -1, '80024affffffff2e', '-1'],
  ['LONG1', 2 ** 40, '80028a060000000000012e', '1099511627776'],
  ['LONG1 negative', -(2 ** 40), '80028a060000000000ff2e', '-1099511627776'],
  ['LONG1 sign byte', 128n, '80028a0280002e', '128'],
  ['LONG1 negative sign byte', -129n, '80028a027fff2e', '-129'],
  ['BINFLOAT', new PyFloat(1.5), '8002473ff80000000000002e', '1.5'],
  ['BINFLOAT integral', new PyFloat(2), '80024740000000000000002e', '2.0'],
  ['BINUNICODE utf-8', 'héllo', '8002580600000068c3a96c6c6f2e', "'héllo'"],
  ['EMPTY_LIST', [], '80025d2e', '[]'],
  ['APPENDS', [1, 2], '80025d284b014b02652e', '[1, 2]'],
  ['EMPTY_TUPLE', new PyTuple([]), '8002292e', '()'],
  ['TUPLE1', new PyTuple([1]), '80024b01852e', '(1,)'],
  ['TUPLE2', new PyTuple([1, 2]), '80024b014b02862e', '(1, 2)'],
  ['TUPLE3', new PyTuple([1, 2, 3]), '80024b014b024b03872e', '(1, 2, 3)'],
  ['MARK TUPLE', new PyTuple([1, 2, 3, 4]), '8002284b014b024b034b04742e', '(1, 2, 3, 4)'],
  ['EMPTY_DICT', new Map(), '80027d2e', '{}'],
  ['SETITEMS', new Map([['a', 1]]), '80027d285801000000614b01752e', "{'a': 1}"],
  [
    'GLOBAL',
    new PyGlobal('collections', 'OrderedDict'),
    '800263636f6c6c656374696f6e730a4f726465726564446963740a2e',
    "<class 'collections.OrderedDict'>",
  ],
  [
    'REDUCE',
    new PyCall(new PyGlobal('builtins', 'complex'), [1, 2]),
    '8002636275696c74696e730a636f6d706c65780a4b014b0286522e',
    '(1+2j)',
  ],
  [
    'NEWOBJ BUILD',
    new PyObject(
      new PyGlobal('argparse', 'Namespace'),
      new Map<string, PyValue>([
        ['x', 1],
        ['y', 'z'],
      ]),
    ),
    '80026361726770617273650a4e616d6573706163650a29817d285801000000784b0158010000007958010000007a75622e',
    "Namespace(x=1, y='z')",
  ],
];

describe('pickle', () => {
  it.each(cases)('%s', (_name, value, hex) => {
    expect(pickle(value).toString('hex')).toBe(hex);
  });

  it('refuses what it was not written for', () => {
    expect(() => pickle(Number.NaN)).toThrow('cannot pickle NaN');
    expect(() => pickle({} as unknown as PyValue)).toThrow('cannot pickle [object Object]');
    expect(() => pickle(new PyGlobal('os', 'system\nbad'))).toThrow('bad global name');
  });
});
