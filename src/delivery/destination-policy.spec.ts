import { loadConfig } from '../config/config.loader';
import { DestinationPolicy } from './destination-policy';

const policy = (list: string) =>
  new DestinationPolicy(loadConfig({ EPD_ALLOWED_DESTINATIONS: list }).config);

describe('DestinationPolicy (EPD_ALLOWED_DESTINATIONS)', () => {
  it('allows anywhere when empty', async () => {
    await expect(policy('').check({ host: '8.8.8.8', port: 1 })).resolves.toBeUndefined();
  });

  it('checks addresses against CIDRs and single IPs, v4, v6 and v4-mapped', async () => {
    const p = policy('10.0.0.0/8,192.168.1.7,fd00::/8');
    for (const host of ['10.1.2.3', '192.168.1.7', 'fd00::1', '[fd00::2]', '::ffff:10.9.9.9']) {
      await expect(p.check({ host, port: 9 })).resolves.toBeUndefined();
    }
    for (const host of ['127.0.0.1', '192.168.1.8', '::1', '11.0.0.1']) {
      await expect(p.check({ host, port: 9 }, 'r1')).rejects.toMatchObject({
        code: 403,
        type: 'destination_not_allowed',
        reqId: 'r1',
      });
    }
    await expect(p.check({ host: '127.0.0.1', port: 9 })).rejects.toThrow(
      'destination 127.0.0.1:9 is not allowed by EPD_ALLOWED_DESTINATIONS (the address is in no listed range)',
    );
  });

  it('allows a listed name and its subdomains; other names by what they resolve to', async () => {
    const p = policy('prefill.internal,127.0.0.0/8,::1');
    await expect(p.check({ host: 'prefill.internal', port: 1 })).resolves.toBeUndefined();
    await expect(p.check({ host: 'a.prefill.internal', port: 1 })).resolves.toBeUndefined();
    // localhost resolves to loopback (v4, maybe v6 too), which is listed.
    await expect(p.check({ host: 'localhost', port: 1 })).resolves.toBeUndefined();
    await expect(policy('10.0.0.0/8').check({ host: 'localhost', port: 1 })).rejects.toThrow(
      /resolves to/,
    );
    await expect(
      policy('10.0.0.0/8').check({ host: 'no-such-host.invalid', port: 1 }),
    ).rejects.toThrow(/does not resolve/);
  });
});
