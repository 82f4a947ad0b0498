import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ComputeError } from '@better-compute/core';

const VERSION = 'v1';

/**
 * Encrypts with AES-256-GCM under `key`, binding `context` (the row it belongs to) as associated data, so a
 * ciphertext copied to another row does not decrypt. The result is `v1.<iv>.<tag>.<ciphertext>` in base64url.
 *
 * @example
 * ```ts
 * const sealed = seal(key, 'pki-secret:sec_01k…', new TextEncoder().encode(value));
 * ```
 */
export function seal(key: Uint8Array, context: string, plaintext: Uint8Array): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const tag = cipher.getAuthTag();
  return [VERSION, iv.toString('base64url'), tag.toString('base64url'), body.toString('base64url')].join('.');
}

/**
 * Decrypts what {@link seal} wrote. A wrong key, a wrong context or a tampered text is INTERNAL (reason
 * `decrypt-failed`): stored data the configured key does not open is an operator problem, not a caller's.
 *
 * @example
 * ```ts
 * const value = new TextDecoder().decode(open(key, 'pki-secret:sec_01k…', sealed));
 * ```
 */
export function open(key: Uint8Array, context: string, sealed: string): Uint8Array {
  const parts = sealed.split('.');
  try {
    if (parts.length !== 4 || parts[0] !== VERSION) throw new Error('unknown sealed format');
    const [, iv, tag, body] = parts as [string, string, string, string];
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return new Uint8Array(Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]));
  } catch (cause) {
    throw new ComputeError('INTERNAL', 'stored ciphertext does not open under the configured key', {
      details: { reason: 'decrypt-failed' },
      cause,
    });
  }
}
