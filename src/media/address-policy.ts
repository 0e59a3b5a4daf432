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

export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return PRIVATE.check(mapped[1]!, 'ipv4');
  // The URL parser writes IPv4-mapped literals in hex: [::ffff:127.0.0.1] → [::ffff:7f00:1].
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return PRIVATE.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, 'ipv4');
  }
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family === 6) return PRIVATE.check(address, 'ipv6');
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
