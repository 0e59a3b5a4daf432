/**
 * The V8 flags the service is launched with: `npm start` (scripts/start.sh),
 * `npm run start:prod`, the Dockerfile, and the tests and benchmarks that start it as its
 * own process. DP workers inherit them (a fork gets the supervisor's execArgv). V8 sizes a
 * heap when it creates it, so these cannot be set from inside the process: they belong on
 * the command line (or in NODE_OPTIONS). A unit test keeps the launchers in step with this
 * list.
 *
 * `--max-semi-space-size=64` (MiB; V8's default on 64-bit is 16): the young generation's
 * room. Under a backlog of NATS calls (the overload gate holds thousands of received calls,
 * every one of them alive across each scavenge) the default size scavenged so often that
 * V8's parallel scavenger threads took ~0.5 of a core on this 2-core machine, from the
 * load itself and nats-server: at twice the sustainable wait_metadata rate the service
 * answered 0.45–0.69 of its sustainable rate ok, and 0.75–0.88 with 64 MiB, in the same
 * five runs (bench/results/overload.md, last row; 128 MiB measured the same as 64, 32 in
 * between). The young generation grows to it only while calls survive collection, and
 * shrinks back when idle.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];

/**
 * The environment the service is launched with, unless the caller sets it: scripts/start.sh,
 * `npm run start:prod`, the Dockerfile, and the tests and benchmarks that start it (so that
 * they measure it as deployed).
 *
 * `MALLOC_ARENA_MAX=2`: glibc gives every thread its own malloc arena and rarely returns
 * their freed pages; the worker threads (preprocessing, ONNX Runtime) then keep the peak
 * of a large request resident. Two arenas measured ~55 MB less after release, at no
 * throughput cost, and fewer fresh pages per encode: 70 page faults per 448² encode
 * against 230 with glibc's default (buffers made in one thread and freed in another are
 * reused sooner).
 */
export const SERVICE_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };

/**
 * The flags of SERVICE_NODE_FLAGS this process was started without (neither on its command
 * line nor in NODE_OPTIONS), by name: main.ts warns about them.
 */
export function missingServiceFlags(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): string[] {
  const given = [...execArgv, ...nodeOptions.split(/\s+/)].map(flagName);
  return SERVICE_NODE_FLAGS.filter((f) => !given.includes(flagName(f)));
}

/** `--max-semi-space-size` of `--max-semi-space-size=64` (V8 accepts `_` for `-` too). */
const flagName = (flag: string): string => flag.split('=')[0]!.replace(/_/g, '-');
