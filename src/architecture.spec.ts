import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const ROOT = join(__dirname, '..');
const depcruise = (cwd: string, args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, 'node_modules/.bin/depcruise'), ...args], {
    cwd,
    encoding: 'utf8',
  });

/**
 * The layers of .dependency-cruiser.cjs (run by `npm run lint`) hold for src/, and each
 * rule does fail: test/fixtures/boundaries has one forbidden import per rule, the
 * internals one from a folder that no rule names.
 */
describe('module boundaries', () => {
  it('src/ has no violation', () => {
    const r = depcruise(ROOT, ['src', '--config', '.dependency-cruiser.cjs']);
    expect(r.stdout).toContain('no dependency violations found');
    expect(r.status).toBe(0);
  });

  it('every rule fails on its forbidden import, naming the rule', () => {
    const r = depcruise(join(ROOT, 'test/fixtures/boundaries'), [
      'src',
      '--config',
      join(ROOT, '.dependency-cruiser.cjs'),
    ]);
    expect(r.status).not.toBe(0);
    for (const line of [
      /no-circular: src\/cycle\/a\.ts/,
      /kernel-imports-only-kernel: src\/common\/bad\.ts/,
      /infrastructure-imports-no-feature: src\/transport\/bad\.ts/,
      /no-feature-internals: src\/brand-new-feature\/bad\.ts → src\/encoder\/pipeline\/stage\.ts/,
      /nothing-imports-entry-points: src\/brand-new-feature\/bad\.ts → src\/app\.module\.ts/,
      /client-imports-no-nest: src\/client\/bad\.ts/,
      /worker-threads-load-no-zod: src\/encoder\/backend\/heavy\.worker\.ts/,
      /jetstream-clients-in-jetstream-only: src\/brand-new-feature\/kv\.ts/,
      /nats-clients-in-transport-only: src\/brand-new-feature\/nats\.ts/,
    ]) {
      expect(r.stdout).toMatch(line);
    }
    // A NATS type named with `import type` is not a use of the client: one violation only.
    expect(
      r.stdout.match(/nats-clients-in-transport-only: src\/brand-new-feature\/nats\.ts/g),
    ).toHaveLength(1);
  });
});

/** Every non-test source file under src/, relative to the root. */
function sources(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return walk(path);
      return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') ? [path] : [];
    });
  return walk(join(ROOT, 'src')).map((p) => relative(ROOT, p));
}

/** Each class with its constructor's parameter count. */
function constructors(file: string): { name: string; params: number }[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: { name: string; params: number }[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isClassDeclaration(node)) {
      const ctor = node.members.find(ts.isConstructorDeclaration);
      if (ctor)
        found.push({ name: node.name?.text ?? '(anonymous)', params: ctor.parameters.length });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Tabular catalogues: one entry per metric or error, long by nature. */
const TABULAR = new Set(['src/metrics/catalogue.ts', 'src/common/errors/error-catalogue.ts']);
const MAX_LINES = 400;

/** Files over the limit (lines by file), but the tabular catalogues. */
function tooLong(lines: Record<string, number>): string[] {
  return Object.entries(lines).flatMap(([file, n]) =>
    TABULAR.has(file) || n <= MAX_LINES ? [] : [`${file}: ${n} lines (at most ${MAX_LINES})`],
  );
}

/** The shape docs/architecture.md promises, checked on every run. */
describe('architecture', () => {
  const files = sources();

  it('no class takes more than 6 constructor dependencies', () => {
    const over = files.flatMap((f) =>
      constructors(f)
        .filter((c) => c.params > 6)
        .map((c) => `${f}: ${c.name} takes ${c.params}`),
    );
    expect(over).toEqual([]);
  });

  it('the encode pipeline (EncoderService) stays at most 250 lines', () => {
    const lines = readFileSync(join(ROOT, 'src/encoder/pipeline/encoder.service.ts'), 'utf8')
      .trimEnd()
      .split('\n').length;
    expect(lines).toBeLessThanOrEqual(250);
  });

  it('no source file passes 400 lines, but the tabular catalogues', () => {
    const lines = (f: string) => readFileSync(join(ROOT, f), 'utf8').trimEnd().split('\n').length;
    const counted = Object.fromEntries(files.map((f) => [f, lines(f)]));
    expect(tooLong(counted)).toEqual([]);
    // And the check fails on a long file, a catalogue aside.
    expect(
      tooLong({ 'src/x/new.ts': 401, 'src/metrics/catalogue.ts': 999, 'src/y.ts': 400 }),
    ).toEqual(['src/x/new.ts: 401 lines (at most 400)']);
  });

  it('the DP role is decided once, in the composition root', () => {
    const root = ['src/app.module.ts', 'src/main.ts', 'src/config/process-role.ts'];
    const deciding = files.filter(
      (f) => !root.includes(f) && /\bdpRole\(/.test(readFileSync(join(ROOT, f), 'utf8')),
    );
    expect(deciding).toEqual([]);
  });

  it('no dependency is optional: each role gets an implementation (a null one included)', () => {
    const optional = files.filter((f) =>
      readFileSync(join(ROOT, f), 'utf8').includes('@Optional()'),
    );
    expect(optional).toEqual([]);
  });

  it('every MMError comes from the error catalogue (src/common/errors/)', () => {
    const minting = files.filter(
      (f) =>
        !f.startsWith('src/common/errors/') &&
        /new (MMError|BadRequestError|InternalError)\(/.test(readFileSync(join(ROOT, f), 'utf8')),
    );
    expect(minting).toEqual([]);
  });

  it('tests wait for conditions, never for a fixed time (test/support/wait.ts)', () => {
    const walk = (dir: string): string[] =>
      readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory()
          ? walk(join(dir, e.name))
          : /\.(spec|e2e-spec)\.ts$|^test\/support\//.test(join(dir, e.name)) &&
              e.name.endsWith('.ts')
            ? [join(dir, e.name)]
            : [],
      );
    const tests = [...walk('src'), ...walk('test')].filter((f) => f !== 'test/support/wait.ts');
    // An awaited timer (a sleep, or the pause of a hand-rolled polling loop), and polling
    // loops that test a clock themselves.
    const sleep = /await (new Promise\(\((r|res|resolve)\) => setTimeout|sleep\()/;
    const poll = /while \(.*Date\.now\(\)|for \([^)]*;[^)]*Date\.now\(\)/;
    const offending = tests.flatMap((f) =>
      readFileSync(join(ROOT, f), 'utf8')
        .split('\n')
        .map((line, i) => ({ line, at: `${f}:${i + 1}` }))
        .filter(({ line }) => sleep.test(line) || poll.test(line))
        .map(({ at, line }) => `${at}: ${line.trim()}`),
    );
    expect(offending).toEqual([]);
  });

  it('services read the time through Clock (a fake one in tests), never Date.now, called or passed as a default', () => {
    // The SDK and the CLI run without the service's DI. Any reference counts: a
    // `now = Date.now` default is the same wall clock a test cannot move (five classes
    // had one, past a check for the string 'Date.now()').
    const allowed = /^src\/(cli|client)\/|^src\/common\/clock\.ts$|testing\.ts$/;
    expect(readingWallClock(files, allowed)).toEqual([]);
    // The check sees what it is for: a default parameter, and a call.
    const fixture = 'src/x/fixture.ts';
    const read = (text: string) => readingWallClock([fixture], allowed, () => text);
    expect(read('constructor(private readonly now: () => number = Date.now) {}')).toEqual([
      fixture,
    ]);
    expect(read('const t = Date.now();')).toEqual([fixture]);
    expect(read('const t = this.clock.now();')).toEqual([]);
    // Nor a Clock of its own: `clock: Clock = new Clock()` as a default (six classes had
    // one) is the wall clock again wherever a caller forgets to pass the injected one.
    expect(read('constructor(private readonly clock: Clock = new Clock()) {}')).toEqual([fixture]);
  });

  it('only the composition root and the role ports branch on the DP role; the files still doing so only leave the list', () => {
    const branching = branchingOnRole(files);
    expect(branching.filter((f) => !ROLE_BRANCHING_TO_MOVE.has(f))).toEqual([]);
    // A file that stopped branching leaves the list.
    expect([...ROLE_BRANCHING_TO_MOVE].filter((f) => !branching.includes(f))).toEqual([]);
    // The check sees what it is for.
    const fixture = 'src/x/fixture.service.ts';
    const of = (text: string) => branchingOnRole([fixture], () => text);
    expect(of('if (this.role.worker) return;')).toEqual([fixture]);
    expect(of('const x = role.supervisor ? a : b;')).toEqual([fixture]);
    expect(of('const rank = this.role.rank;')).toEqual([]);
    expect(of('const { rank, worker } = this.role;')).toEqual([fixture]);
    expect(of('const { rank } = this.role;')).toEqual([]);
    expect(branchingOnRole(['src/x/x.module.ts'], () => 'role.worker ? A : B')).toEqual([]);
  });
  it('only modules and factories construct an adapter (a class that implements a port); the services still doing so only leave the list', () => {
    const constructing = constructingAdapters(files);
    expect(constructing.filter((f) => !ADAPTER_CONSTRUCTION_TO_MOVE.has(f))).toEqual([]);
    expect([...ADAPTER_CONSTRUCTION_TO_MOVE].filter((f) => !constructing.includes(f))).toEqual([]);
    // The check sees what it is for: a port's implementation made in a service, not in a
    // module or a factory, and not any other class.
    const sources: Record<string, string> = {
      'src/x/port.ts': 'export abstract class Port {}',
      'src/x/impl.ts': 'export class Impl extends Port {}',
      'src/x/other.ts': 'export class Other {}',
      'src/x/user.service.ts': 'this.p = new Impl(a); this.o = new Other();',
      'src/x/x.module.ts': 'useFactory: () => new Impl(a)',
    };
    expect(constructingAdapters(Object.keys(sources), (f) => sources[f]!)).toEqual([
      'src/x/user.service.ts',
    ]);
  });
});

/**
 * Services that still branch on the DP role (role.worker, role.supervisor, role.single)
 * instead of receiving a port with one implementation per role (issue "Architecture,
 * third step"): a file leaves the list when it stops, and no file joins it.
 */
const ROLE_BRANCHING_TO_MOVE = new Set<string>([]);

/** `role.worker` (…supervisor, …single), or the same taken out of a role: `{ worker } = this.role`. */
const ROLE_TEST =
  /\brole\.(worker|supervisor|single)\b|\{[^}]*\b(worker|supervisor|single)\b[^}]*\}\s*=\s*(this\.)?role\b/;

/**
 * Files that branch on the DP role, but the composition root (modules, main.ts,
 * bootstrap.ts, app.module.ts) and the role's own definition, comments aside.
 */
function branchingOnRole(
  files: string[],
  text: (f: string) => string = (f) => readFileSync(join(ROOT, f), 'utf8'),
): string[] {
  const root = /\.module\.ts$|^src\/(main|bootstrap)\.ts$|^src\/config\/process-role\.ts$/;
  return files.filter((f) => !root.test(f) && ROLE_TEST.test(withoutComments(text(f))));
}

/** Files (outside `allowed`) whose code names Date.now or makes a Clock, comments aside. */
function readingWallClock(
  files: string[],
  allowed: RegExp,
  text: (f: string) => string = (f) => readFileSync(join(ROOT, f), 'utf8'),
): string[] {
  return files.filter(
    (f) => !allowed.test(f) && /\bDate\.now\b|\bnew Clock\(/.test(withoutComments(text(f))),
  );
}

/**
 * Services that still construct a port's implementation themselves: none now (EncodeCache
 * and the DP supervisor made their cache claims until claims.providers.ts and
 * worker-claims.providers.ts did). A file joins it only with a reason.
 */
const ADAPTER_CONSTRUCTION_TO_MOVE = new Set<string>([]);

/**
 * Files, but modules, factories (`*.providers.ts`), test helpers (`testing.ts`) and the
 * entry points, that construct a class extending one of src's abstract classes (a port).
 */
function constructingAdapters(
  files: string[],
  text: (f: string) => string = (f) => readFileSync(join(ROOT, f), 'utf8'),
): string[] {
  const sources = new Map(files.map((f) => [f, withoutComments(text(f))]));
  const ports = new Set<string>();
  for (const t of sources.values())
    for (const m of t.matchAll(/export abstract class (\w+)/g)) ports.add(m[1]!);
  const adapters = new Set<string>();
  for (const t of sources.values())
    for (const m of t.matchAll(/export class (\w+) extends (\w+)/g))
      if (ports.has(m[2]!)) adapters.add(m[1]!);
  const allowed = /\.module\.ts$|\.providers\.ts$|testing\.ts$|^src\/(main|bootstrap)\.ts$/;
  return files.filter(
    (f) =>
      !allowed.test(f) &&
      [...sources.get(f)!.matchAll(/\bnew (\w+)\(/g)].some((m) => adapters.has(m[1]!)),
  );
}

/** Source text without its comments, for the checks above (they read code, not prose). */
function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
}
