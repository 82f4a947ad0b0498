import { isIP } from 'node:net';
import { ComputeError, type ErrorPath } from '@better-compute/core';
import { storableTextProblem } from '@better-compute/core/checks';
import * as v from 'valibot';

/** An id or name in an API input: a non-empty string of at most 512 characters. */
export function textSchema(field: string, max = 512) {
  return v.pipe(
    v.string(`${field} must be a string`),
    v.minLength(1, `${field} must not be empty`),
    v.maxLength(max, `${field} must be at most ${max} characters`),
  );
}

/** A MAC as an API takes it: six colon-separated hex octets, stored in lower case. */
export const MAC_PATTERN = /^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/;

/** A driver name: `ipmi`, `redfish`, or any name a site agent implements (lower-case, digits, `-`, `_`, `.`). */
export const DRIVER_PATTERN = /^[a-z][a-z0-9._-]{0,63}$/;

const HOST_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;

export function invalidInput(message: string, path: ErrorPath): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path } });
}

function isHostName(host: string): boolean {
  if (host.length > 253) return false;
  const labels = host.split('.');
  // A name of digits and dots only would be a malformed IPv4 address, not a name.
  if (labels.every((label) => /^\d+$/.test(label))) return false;
  return labels.every((label) => HOST_LABEL.test(label));
}

/**
 * Checks a BMC address: `host` or `host:port`, the host an IPv4 address, a bracketed IPv6 address (bare when no port
 * is given) or a DNS name, the port 1 to 65535. No scheme, path or credentials: the driver knows how to speak to it.
 * Anything else is INVALID_INPUT at `path`.
 *
 * @example
 * ```ts
 * checkBmcAddress('10.0.0.7', ['bmc', 'address']); // '10.0.0.7'
 * checkBmcAddress('[fd00::7]:623', ['bmc', 'address']); // '[fd00::7]:623'
 * checkBmcAddress('http://10.0.0.7', ['bmc', 'address']); // throws INVALID_INPUT
 * ```
 */
export function checkBmcAddress(address: string, path: ErrorPath): string {
  const refuse = () =>
    invalidInput(
      'bmc.address must be host or host:port (an IP address or a DNS name, IPv6 in brackets with a port)',
      path,
    );
  if (isIP(address) === 6) return address.toLowerCase();
  let host = address;
  let port: string | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(address);
  if (bracketed) {
    host = bracketed[1] as string;
    port = bracketed[2];
    if (isIP(host) !== 6) throw refuse();
  } else {
    const colon = address.lastIndexOf(':');
    if (colon !== -1) {
      host = address.slice(0, colon);
      port = address.slice(colon + 1);
      if (!/^\d{1,5}$/.test(port)) throw refuse();
    }
    if (isIP(host) !== 4 && !isHostName(host)) throw refuse();
  }
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65_535)) throw refuse();
  return address.toLowerCase();
}

/**
 * Checks and normalises a MAC list: each six colon-separated hex octets (stored in lower case), none twice. A bad or
 * repeated MAC is INVALID_INPUT at `[...path, index]`.
 *
 * @example
 * ```ts
 * checkMacs(['AA:BB:CC:00:11:22'], ['macs']); // ['aa:bb:cc:00:11:22']
 * ```
 */
export function checkMacs(macs: readonly string[], path: ErrorPath): string[] {
  const seen = new Set<string>();
  return macs.map((mac, index) => {
    if (!MAC_PATTERN.test(mac)) throw invalidInput('a MAC must be six colon-separated hex octets', [...path, index]);
    const lower = mac.toLowerCase();
    if (seen.has(lower)) throw invalidInput(`MAC ${lower} is listed twice`, [...path, index]);
    seen.add(lower);
    return lower;
  });
}

/** Refuses text PostgreSQL cannot store (a NUL, a lone surrogate) at `path`. */
export function checkStorable(value: string, path: ErrorPath): string {
  const problem = storableTextProblem(value);
  if (problem) throw invalidInput(`${path.join('.')} ${problem}`, path);
  return value;
}

const macSchema = v.pipe(v.string('a MAC must be a string'), v.maxLength(17, 'a MAC is 17 characters'));

/** The BMC of an enroll or adopt: its address, driver and optional credentials. */
export const bmcSchema = v.object({
  address: textSchema('bmc.address', 255),
  driver: v.pipe(
    v.string('bmc.driver must be a string'),
    v.regex(DRIVER_PATTERN, 'bmc.driver must be a driver name like ipmi or redfish'),
  ),
  username: v.optional(textSchema('bmc.username', 256)),
  password: v.optional(textSchema('bmc.password', 1024)),
});

/** The MACs of an enroll or adopt: one to 64. */
export const macsSchema = v.pipe(
  v.array(macSchema, 'macs must be an array of MACs'),
  v.minLength(1, 'macs must list at least one MAC'),
  v.maxLength(64, 'macs lists at most 64 MACs'),
);

/** Labels as an API takes them; checked like the kernel checks labels in the handler. */
export const labelsSchema = v.record(v.string(), v.string('a label value must be a string'));
