import { BlockList, isIP } from 'node:net';
import { ComputeError, type ErrorPath } from '@better-compute/core';

// Addresses no machine request may reach, whatever a machine's record says: they would reach the site agent itself,
// its neighbours on the link, or a cloud's metadata service, which is what an SSRF goes after.
const FORBIDDEN = new BlockList();
FORBIDDEN.addSubnet('0.0.0.0', 8, 'ipv4'); // "this network", 0.0.0.0 reaches the local host
FORBIDDEN.addSubnet('127.0.0.0', 8, 'ipv4'); // loopback
FORBIDDEN.addSubnet('169.254.0.0', 16, 'ipv4'); // link-local, 169.254.169.254 is the usual metadata service
FORBIDDEN.addSubnet('224.0.0.0', 4, 'ipv4'); // multicast
FORBIDDEN.addSubnet('240.0.0.0', 4, 'ipv4'); // reserved, and 255.255.255.255 broadcast
FORBIDDEN.addAddress('::', 'ipv6'); // unspecified
FORBIDDEN.addAddress('::1', 'ipv6'); // loopback
FORBIDDEN.addSubnet('fe80::', 10, 'ipv6'); // link-local
FORBIDDEN.addSubnet('ff00::', 8, 'ipv6'); // multicast
FORBIDDEN.addAddress('fd00:ec2::254', 'ipv6'); // a cloud metadata service's IPv6 address

/** What the control plane knows of the machine a request is for. */
export interface MachineAddresses {
  /** The addresses recorded for this machine (its agent's reports, its leases): the only ones a request may reach. */
  own: readonly string[];
}

/** A URL `httpViaSite` may send: http or https to one of the machine's own addresses, no credentials in it. */
export interface MachineUrl {
  url: URL;
  /** The address it reaches, normalised (an IPv6 one without brackets, lower case). */
  address: string;
  family: 'ipv4' | 'ipv6';
}

function refuse(message: string, path: ErrorPath): never {
  throw new ComputeError('INVALID_INPUT', message, { details: { path, reason: 'ssrf' } });
}

// IPv4-mapped IPv6 (::ffff:127.0.0.1, which URL parsing spells ::ffff:7f00:1) reaches the IPv4 address: judge it as
// that one.
function unmapped(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (dotted?.[1]) return { address: dotted[1], family: 'ipv4' };
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (hex?.[1] && hex[2]) {
    const high = Number.parseInt(hex[1], 16);
    const low = Number.parseInt(hex[2], 16);
    return { address: [high >> 8, high & 255, low >> 8, low & 255].join('.'), family: 'ipv4' };
  }
  return { address: address.toLowerCase(), family: isIP(address) === 6 ? 'ipv6' : 'ipv4' };
}

function sameAddress(a: string, b: string): boolean {
  const x = unmapped(a);
  const y = unmapped(b);
  if (x.family !== y.family) return false;
  if (x.family === 'ipv4') return x.address === y.address;
  // Two spellings of one IPv6 address (zeros compressed or not) are the same address.
  const list = new BlockList();
  list.addAddress(x.address, 'ipv6');
  return list.check(y.address, 'ipv6');
}

/**
 * Checks a URL a step wants the site agent to fetch from a machine, before anything is sent: http or https, no user
 * or password, a host that is an IP address (no name a resolver could point elsewhere), not loopback, link-local,
 * multicast, unspecified or a metadata service, and one of the addresses the control plane knows for that machine
 * (so not another machine's). Anything else is INVALID_INPUT at `path` with `details.reason: 'ssrf'`.
 *
 * @example
 * ```ts
 * checkMachineUrl('https://10.0.0.7:50000/machine/version', { own: ['10.0.0.7'] }); // { address: '10.0.0.7', … }
 * checkMachineUrl('http://169.254.169.254/latest/meta-data', { own: ['10.0.0.7'] }); // throws INVALID_INPUT
 * ```
 */
export function checkMachineUrl(raw: unknown, machine: MachineAddresses, path: ErrorPath = ['url']): MachineUrl {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 2_048) {
    refuse('url must be a non-empty string of at most 2048 characters', path);
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    refuse('url is not a valid URL', path);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') refuse('url must be http or https', path);
  if (url.username !== '' || url.password !== '') refuse('url must not carry credentials', path);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(host) === 0) refuse("url's host must be an IP address of the machine, not a name", path);
  const { address, family } = unmapped(host);
  if (FORBIDDEN.check(address, family))
    refuse(`url's host ${address} is an address no machine request may reach`, path);
  if (!machine.own.some((own) => isIP(own) !== 0 && sameAddress(own, address))) {
    refuse(`url's host ${address} is not an address of this machine`, path);
  }
  return { url, address, family };
}
