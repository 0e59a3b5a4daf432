import { headers } from '@nats-io/transport-node';
import { NatsContext } from '@nestjs/microservices';
import { callTimeoutMs } from './deadline';

describe('callTimeoutMs', () => {
  const ctx = (deadline?: string) => {
    const h = headers();
    if (deadline) h.set('Deadline', deadline);
    return new NatsContext(['epd.v1.wait_metadata', h]);
  };

  it('uses the cap when the caller names no deadline', () => {
    expect(callTimeoutMs(undefined, 180000, undefined, 1000)).toBe(180000);
  });
  it('caps timeout_ms at the configured maximum', () => {
    expect(callTimeoutMs(500, 180000, undefined, 1000)).toBe(500);
    expect(callTimeoutMs(10_000_000, 180000, undefined, 1000)).toBe(180000);
  });
  it('takes the earlier of timeout_ms and the Deadline header (epoch ms)', () => {
    expect(callTimeoutMs(5000, 180000, ctx('1300'), 1000)).toBe(300);
    expect(callTimeoutMs(200, 180000, ctx('9000'), 1000)).toBe(200);
  });
  it('turns a passed deadline into an immediate timeout, not an unbounded wait', () => {
    expect(callTimeoutMs(undefined, 180000, ctx('10'), 1000)).toBe(1);
  });
  it('ignores a malformed Deadline header', () => {
    expect(callTimeoutMs(700, 180000, ctx('soon'), 1000)).toBe(700);
  });
});
