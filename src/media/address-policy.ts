import { BlockList, isIP } from 'node:net';

/** Addresses a media fetch may not reach unless EPD_MEDIA_ALLOW_PRIVATE_NETWORKS is set. */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv6');
}

/**
 * An IPv4-mapped IPv6 address as the IPv4 address it is (`::ffff:127.0.0.1`, or the URL
 * parser's hex form `::ffff:7f00:1`, → `127.0.0.1`); any other text unchanged.
 */
export function unmapIPv4(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!hex) return address;
  const hi = parseInt(hex[1]!, 16);
  const lo = parseInt(hex[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

export function isPrivateAddress(address: string): boolean {
  const plain = unmapIPv4(address);
  const family = isIP(plain);
  if (family === 4) return PRIVATE.check(plain, 'ipv4');
  if (family === 6) return PRIVATE.check(plain, 'ipv6');
  return true;
}

/** Exact host or a subdomain of an allowed domain; an IP literal must be listed as is. */
export function isAllowedHost(hostname: string, allowed: readonly string[]): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return allowed.some((d) => {
    const domain = d.toLowerCase();
    // An IP entry matches only itself: `1.127.0.0.1` is a name, not a subdomain of an address.
    return host === domain || (!isIP(host) && !isIP(domain) && host.endsWith(`.${domain}`));
  });
}
