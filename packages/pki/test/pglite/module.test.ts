import type { ModuleContext } from '@better-compute/core';
import { readMigrationFolder } from '@better-compute/core/kernel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKeyPair, pki, pkiMigrationsFolder } from '../../src';
import { fakeClock, findPlaintext, scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness } from '../support/harness';

let h: Harness;

beforeAll(async () => {
  h = await createHarness(await scratchPglite());
});
afterAll(() => h.scratch.drop());

describe('pki()', () => {
  it('returns a module with its migrations and a command policy', async () => {
    const service = pki({ key: h.key });
    expect(service.module.id).toBe('pki');
    expect(service.module.migrations).toEqual({ folder: pkiMigrationsFolder });
    expect((await readMigrationFolder(pkiMigrationsFolder)).map((m) => m.name)).toEqual([
      '0000_init',
      '0001_batch_rejection',
      '0002_certificate_changes_notify',
    ]);
    expect(typeof service.module.commandPolicy).toBe('function');
  });

  it('gives a PkiPort whose tokens join, and a SecretBroker, as the kernel wires them', async () => {
    const service = pki({ key: h.key, clock: h.clock });
    const port = service.port();
    const { token } = await h.scratch.db.transaction((tx) =>
      port.issueJoinToken(tx, { tenantId: 'root', role: 'discovery', siteId: 'site_root', ttlSeconds: 60, maxUses: 1 }),
    );
    const secrets = service.secrets(h.scratch.db);
    const ref = await secrets.put('root', 'document-through-the-port');
    expect(await secrets.resolve(ref)).toBe('document-through-the-port');
    const joined = await h.scratch.db.transaction((tx) =>
      service.joinAgent(tx, { token, publicKey: generateSigningKeyPair().publicJwk }),
    );
    expect(joined.nodeId).toMatch(/^node_/);
    expect(await findPlaintext(h.scratch.db, [token, 'document-through-the-port'])).toEqual([]);
  });

  it("adopts the kernel's clock at init when none was configured", async () => {
    const service = pki({ key: h.key });
    const late = fakeClock(new Date('2030-01-01T00:00:00Z'));
    await service.module.init?.({ clock: late, log: h.log } as unknown as ModuleContext);
    const { token } = await h.scratch.db.transaction((tx) =>
      service.issueJoinToken(tx, { tenantId: 'root', role: 'discovery', siteId: 'site_root', ttlSeconds: 60 }),
    );
    const { rows } = await h.scratch.db.query<{ expires_at: Date }>(
      'SELECT expires_at FROM pki_join_tokens WHERE id = $1',
      [token.split('.')[0]],
    );
    expect(rows[0]?.expires_at.toISOString()).toBe('2030-01-01T00:01:00.000Z');
  });

  it('refuses a key that is not 32 bytes with INVALID_CONFIG at key', async () => {
    const error = await computeErrorOf(() => pki({ key: 'too-short' }), 'INVALID_CONFIG');
    expect(error.details.path).toEqual(['key']);
  });
});
