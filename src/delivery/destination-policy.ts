import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { Injectable } from '@nestjs/common';
import { Errors } from '../common/errors/error-catalogue';
import { AppConfig } from '../config/app-config';
import { isAllowedHost, unmapIPv4 } from '../media/address-policy';
import { endpointKey, type Endpoint } from '../transfer/embedding-transport';

/**
 * EPD_ALLOWED_DESTINATIONS: where this encoder may push embeddings (TCP frames or SGLang's
 * ZMQ push), whoever names the destination (`send`, `register_destinations`, the encode's
 * `prefill_host`). Entries are CIDRs, IPs and host names (a name allows its subdomains).
 * An address is allowed when a range holds it; a name when it is listed, or when every
 * address it resolves to is. Empty: anywhere (docs/operations.md, Security, names the risk).
 */
@Injectable()
export class DestinationPolicy {
  private readonly ranges = new BlockList();
  private readonly names: string[] = [];
  private readonly open: boolean;

  constructor(config: AppConfig) {
    const entries = config.transfer.allowedDestinations;
    this.open = entries.length === 0;
    for (const entry of entries) {
      const [net, bits] = entry.split('/');
      const family = isIP(net ?? '');
      if (family === 0) {
        this.names.push(entry.toLowerCase());
        continue;
      }
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (bits === undefined) this.ranges.addAddress(net!, type);
      else this.ranges.addSubnet(net!, Number(bits), type);
    }
  }

  /** Throws 403 `destination_not_allowed` unless `endpoint` may receive embeddings. */
  async check(endpoint: Endpoint, reqId?: string): Promise<void> {
    if (this.open) return;
    const why = await this.refusal(endpoint.host);
    if (why) throw Errors.destinationNotAllowed(endpointKey(endpoint), why, reqId);
  }

  /** Whether `endpoint` may receive: for best-effort pushes (error frames) that must not fail. */
  async allows(endpoint: Endpoint): Promise<boolean> {
    return this.open || (await this.refusal(endpoint.host)) === undefined;
  }

  private async refusal(host: string): Promise<string | undefined> {
    const address = unmapIPv4(host.replace(/^\[|\]$/g, ''));
    const family = isIP(address);
    if (family !== 0) {
      return this.ranges.check(address, family === 4 ? 'ipv4' : 'ipv6')
        ? undefined
        : 'the address is in no listed range';
    }
    if (isAllowedHost(address, this.names)) return undefined;
    let resolved: { address: string; family: number }[];
    try {
      resolved = await lookup(address, { all: true });
    } catch (err) {
      return `the name does not resolve: ${(err as NodeJS.ErrnoException).code ?? 'error'}`;
    }
    const outside = resolved.find(
      (r) =>
        !this.ranges.check(
          unmapIPv4(r.address),
          isIP(unmapIPv4(r.address)) === 4 ? 'ipv4' : 'ipv6',
        ),
    );
    return outside ? `it resolves to ${outside.address}, in no listed range` : undefined;
  }
}
