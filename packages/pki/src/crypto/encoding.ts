import { ComputeError, type ErrorPath } from '@better-compute/core';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * Bytes as unpadded base64url, the encoding of every signature and token secret this package writes.
 *
 * @example
 * ```ts
 * toBase64Url(new Uint8Array([251, 255])); // '-_8'
 * ```
 */
export function toBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/**
 * Decodes base64url (padded or not) or standard base64; anything else is INVALID_INPUT at `path`.
 *
 * @example
 * ```ts
 * fromBase64('-_8', ['signature']); // Uint8Array [251, 255]
 * ```
 */
export function fromBase64(text: unknown, path: ErrorPath): Uint8Array {
  if (typeof text !== 'string' || text.length === 0) {
    throw new ComputeError('INVALID_INPUT', 'expected a non-empty base64 string', { details: { path } });
  }
  const unpadded = text.replace(/=+$/, '');
  if (!(BASE64URL.test(unpadded) || BASE64.test(text)) || unpadded.length % 4 === 1) {
    throw new ComputeError('INVALID_INPUT', 'not valid base64', { details: { path } });
  }
  const normal = unpadded.replace(/-/g, '+').replace(/_/g, '/');
  return new Uint8Array(Buffer.from(normal, 'base64'));
}
