import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ComputeError } from '@better-compute/core';

/** The at-rest key as configuration gives it: 32 bytes, as 64 hex digits, base64 or base64url, or raw bytes. */
export type SecretKeyInput = string | Uint8Array;

/**
 * Reads the 32-byte at-rest key. Anything else is INVALID_CONFIG at `path`; the message never repeats the key.
 *
 * @example
 * ```ts
 * const key = parseSecretKey(process.env.BETTER_COMPUTE_SECRET_KEY!);
 * ```
 */
export function parseSecretKey(input: unknown, path: readonly (string | number)[] = ['key']): Uint8Array {
  let bytes: Uint8Array | undefined;
  if (input instanceof Uint8Array) bytes = new Uint8Array(input);
  else if (typeof input === 'string') {
    const text = input.trim();
    if (/^[0-9a-fA-F]{64}$/.test(text)) bytes = new Uint8Array(Buffer.from(text, 'hex'));
    else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
      bytes = new Uint8Array(Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64'));
    }
  }
  if (bytes?.length !== 32) {
    throw new ComputeError('INVALID_CONFIG', 'the secret key must be 32 bytes, as 64 hex digits or base64', {
      details: { path, reason: 'bad-key' },
    });
  }
  return bytes;
}

/**
 * The embedded default's key: reads the key file at `path`, or creates it (32 random bytes as base64, mode 0600, its
 * folder 0700) when it does not exist. Two processes creating it at once agree on the first one written.
 *
 * @example
 * ```ts
 * const key = await loadOrCreateKeyFile('./data.key'); // beside ./data
 * ```
 */
export async function loadOrCreateKeyFile(path: string): Promise<Uint8Array> {
  try {
    return parseSecretKey(await readFile(path, 'utf8'), ['keyFile']);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  // Written whole under a name of its own, then linked to `path` (atomic, and refused when `path` exists): a creator
  // that loses the race reads a complete key, never the winner's file between its creation and its write.
  const draft = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(draft, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    // The umask may have narrowed the mode further, never widened it; make it exactly 0600.
    await chmod(draft, 0o600);
    await link(draft, path);
    return new Uint8Array(key);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST')
      return parseSecretKey(await readFile(path, 'utf8'), ['keyFile']);
    throw error;
  } finally {
    await unlink(draft).catch(() => undefined);
  }
}
