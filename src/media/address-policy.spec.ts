import { isAllowedHost, isPrivateAddress } from './address-policy';

describe('address policy', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '192.168.0.1',
    '169.254.169.254',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:a9fe:a9fe',
    'fe80::1',
    'not-an-ip',
  ])('treats %s as private (or unknown, which is refused)', (a) => {
    expect(isPrivateAddress(a)).toBe(true);
  });

  it.each(['93.184.216.34', '2606:2800:220:1::1', '::ffff:5db8:d822'])(
    'treats %s as public',
    (a) => {
      expect(isPrivateAddress(a)).toBe(false);
    },
  );

  it('matches listed hosts and their subdomains, and IP literals only exactly', () => {
    expect(isAllowedHost('cdn.example.com', ['example.com'])).toBe(true);
    expect(isAllowedHost('[::1]', ['::1'])).toBe(true);
    expect(isAllowedHost('1.127.0.0.1', ['127.0.0.1'])).toBe(false);
    expect(isAllowedHost('evilexample.com', ['example.com'])).toBe(false);
  });
});
