import type { Snapshot } from '../metrics/dashboard/dashboard.service';

const bytes = (n: number) =>
  n >= 1 << 30
    ? `${(n / (1 << 30)).toFixed(2)} GiB`
    : n >= 1 << 20
      ? `${(n / (1 << 20)).toFixed(1)} MiB`
      : n >= 1024
        ? `${(n / 1024).toFixed(1)} KiB`
        : `${n} B`;
const ms = (s: number | null) => (s === null ? '-' : `${(s * 1000).toFixed(2)} ms`);

/** Rows of cells as an aligned table, the first row a header. */
export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '),
    )
    .join('\n');
}

/** `epd status`: the dashboard's numbers (GET /admin/status) as terminal tables. */
export function formatStatus(s: Snapshot): string {
  const parts = [
    table([
      ['', 'value'],
      ['registry entries', String(s.registry.entries)],
      ['pending waiters', String(s.registry.waiters)],
      ['staged', bytes(s.staging.bytes)],
      ['requests with state', String(s.staging.active)],
      ['oldest staged', `${s.staging.oldestAgeS.toFixed(1)} s`],
      ['forward queue', String(s.queue.depth)],
      ['encodes in flight', String(s.queue.pending)],
      ['NATS calls queued', String(s.queue.nats)],
      [
        'encodes ok / error / rejected',
        `${s.encode.success} / ${s.encode.error} / ${s.encode.rejected}`,
      ],
      [
        'waits ok / 504 / error / cancelled',
        `${s.wait.ok} / ${s.wait.timeout} / ${s.wait.error} / ${s.wait.cancelled}`,
      ],
      ['wait p50 / p99 (last interval)', `${ms(s.wait.p50)} / ${ms(s.wait.p99)}`],
    ]),
    table([
      ['dp_rank', 'active', 'staged', 'queue', 'encodes'],
      ...s.ranks.map((r) => [
        r.rank,
        String(r.active),
        bytes(r.stagedBytes),
        String(r.queue),
        String(r.encodes),
      ]),
    ]),
    table([
      ['instance', 'state', 'heartbeat'],
      ...s.instances.map((i) => [
        `${i.id}${i.self ? ' (this)' : ''}`,
        i.alive ? 'alive' : 'gone',
        `${(i.lastHeartbeatMsAgo / 1000).toFixed(1)} s ago`,
      ]),
    ]),
  ];
  if (s.models.length > 0)
    parts.push(
      table([
        ['model', 'family', 'stand-in', 'encodes ok / error / rejected'],
        ...s.models.map((m) => [
          m.name,
          m.family,
          m.reference ? 'yes' : 'no',
          `${m.success} / ${m.error} / ${m.rejected}`,
        ]),
      ]),
    );
  if (s.errors.length > 0)
    parts.push(
      table([['errors (last minute)', 'count'], ...s.errors.map((e) => [e.type, String(e.count)])]),
    );
  return parts.join('\n\n');
}
