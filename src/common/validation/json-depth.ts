import { Errors } from '../errors/error-catalogue';

/** Deeper than any message of ours (the deepest schema nests 4 levels). */
export const MAX_JSON_DEPTH = 32;

/**
 * Refuses values nested deeper than `max`, without recursion (so the check itself cannot
 * overflow the stack). Runs before validation: a 10,000-level `num_parts` used to reach
 * recursive code and come back as `RangeError: Maximum call stack size exceeded` → 500.
 */
export function assertJsonDepth(value: unknown, max = MAX_JSON_DEPTH): void {
  if (typeof value !== 'object' || value === null) return;
  const stack: [object, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > max) throw Errors.badRequest(`request nests deeper than ${max} levels`);
    for (const child of Object.values(node) as unknown[]) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
}
