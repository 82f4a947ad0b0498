import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadOrCreateKeyFile, open, parseSecretKey, seal } from '../src';
import { computeErrorOf } from './support/errors';

describe('the at-rest key', () => {
  const bytes = new Uint8Array(randomBytes(32));

  it('reads 32 bytes as hex, base64 and base64url', () => {
    expect(parseSecretKey(Buffer.from(bytes).toString('hex'))).toEqual(bytes);
    expect(parseSecretKey(Buffer.from(bytes).toString('base64'))).toEqual(bytes);
    expect(parseSecretKey(Buffer.from(bytes).toString('base64url'))).toEqual(bytes);
  });

  it('refuses other lengths with INVALID_CONFIG and does not repeat the key', async () => {
    const short = Buffer.from(bytes.subarray(0, 16)).toString('hex');
    const error = await computeErrorOf(() => parseSecretKey(short, ['secrets', 'key']), 'INVALID_CONFIG');
    expect(error.details.path).toEqual(['secrets', 'key']);
    expect(error.message).not.toContain(short);
  });

  it('creates a key file with mode 0600 and reads the same key back', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'pki-key-'));
    const path = join(folder, 'data', 'secret.key');
    const created = await loadOrCreateKeyFile(path);
    expect(created.length).toBe(32);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await loadOrCreateKeyFile(path)).toEqual(created);
    expect(parseSecretKey(await readFile(path, 'utf8'))).toEqual(created);
  });

  it('concurrent creations agree on one key, and none reads it half-written', async () => {
    for (let round = 0; round < 20; round += 1) {
      const folder = await mkdtemp(join(tmpdir(), 'pki-key-'));
      const path = join(folder, 'secret.key');
      const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateKeyFile(path)));
      for (const key of keys) expect(key).toEqual(keys[0]);
      // Only the key file is left: every creator's draft is gone.
      expect(await readdir(folder)).toEqual(['secret.key']);
    }
  });
});

describe('AES-256-GCM sealing', () => {
  const key = new Uint8Array(randomBytes(32));
  const plaintext = new TextEncoder().encode('hunter2-value');

  it('round-trips and hides the plaintext', () => {
    const sealed = seal(key, 'ctx', plaintext);
    expect(sealed).not.toContain('hunter2');
    expect(open(key, 'ctx', sealed)).toEqual(plaintext);
  });

  it('does not open under another key, another context or after tampering', async () => {
    const sealed = seal(key, 'pki-secret:a', plaintext);
    await computeErrorOf(() => open(new Uint8Array(randomBytes(32)), 'pki-secret:a', sealed), 'INTERNAL');
    await computeErrorOf(() => open(key, 'pki-secret:b', sealed), 'INTERNAL');
    const parts = sealed.split('.');
    const body = Buffer.from(parts[3] ?? '', 'base64url');
    body[0] = (body[0] ?? 0) ^ 1;
    await computeErrorOf(
      () => open(key, 'pki-secret:a', [parts[0], parts[1], parts[2], body.toString('base64url')].join('.')),
      'INTERNAL',
    );
  });
});
