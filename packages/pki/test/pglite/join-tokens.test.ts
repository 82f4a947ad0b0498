import { isComputeError } from '@better-compute/core';
import { type CommitChange, commit, type StagedWrite } from '@better-compute/core/kernel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKeyPair, pki } from '../../src';
import { findInLogs, findPlaintext, insertNode, scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness, issueTracked } from '../support/harness';

let h: Harness;
const agentKey = generateSigningKeyPair('ed25519');

beforeAll(async () => {
  h = await createHarness(await scratchPglite());
});
afterAll(() => h.scratch.drop());

const join = (input: { token: unknown; publicKey?: unknown; claims?: unknown }) =>
  h.scratch.db.transaction((tx) => h.pki.joinAgent(tx, { publicKey: agentKey.publicJwk, ...input } as never));

async function uses(id: string): Promise<number> {
  const { rows } = await h.scratch.db.query<{ uses: number }>('SELECT uses FROM pki_join_tokens WHERE id = $1', [id]);
  return Number(rows[0]?.uses);
}

describe('issuing join tokens', () => {
  it('returns a tok_ id and a token, and stores only a hash of its secret', async () => {
    const { id, token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 600,
    });
    expect(id).toMatch(/^tok_[0-9a-z]{26}$/);
    expect(token.startsWith(`${id}.`)).toBe(true);
    const { rows } = await h.scratch.db.query<{ secret_hash: string }>(
      'SELECT secret_hash FROM pki_join_tokens WHERE id = $1',
      [id],
    );
    expect(rows[0]?.secret_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0]?.secret_hash).not.toContain(token.split('.')[1]);
  });

  it.each([
    [{ tenantId: '', role: 'node', ttlSeconds: 60 }, ['tenantId']],
    [{ tenantId: 'root', role: 'admin', ttlSeconds: 60 }, ['role']],
    [{ tenantId: 'root', role: 'discovery', ttlSeconds: 0 }, ['ttlSeconds']],
    [{ tenantId: 'root', role: 'discovery', ttlSeconds: 1.5 }, ['ttlSeconds']],
    [{ tenantId: 'root', role: 'discovery', ttlSeconds: 60, maxUses: 0 }, ['maxUses']],
    [{ tenantId: 'root', role: 'discovery', ttlSeconds: 60, expect: { color: 'red' } }, ['expect', 'color']],
    [{ tenantId: 'root', role: 'discovery', ttlSeconds: 60, expect: { mac: 5 } }, ['expect', 'mac']],
    [{ tenantId: 'root', role: 'site', ttlSeconds: 60 }, ['siteId']],
    [{ tenantId: 'root', role: 'node', ttlSeconds: 60 }, ['nodeId']],
    [{ tenantId: 'ro\u0000ot', role: 'discovery', ttlSeconds: 60 }, ['tenantId']],
    [{ tenantId: 'root', role: 'site', siteId: 'site_\ud800', ttlSeconds: 60 }, ['siteId']],
    [{ tenantId: 'root', role: 'discovery', ttlSeconds: 60, expect: { mac: 'aa\u0000' } }, ['expect', 'mac']],
  ])('refuses bad input %j with INVALID_INPUT at %j', async (input, path) => {
    const error = await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.issueJoinToken(tx, input as never)),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(path);
  });

  it('refuses an unknown tenant, and a site of another tenant, as NOT_FOUND', async () => {
    const tenant = await computeErrorOf(
      h.scratch.db.transaction((tx) =>
        h.pki.issueJoinToken(tx, { tenantId: 'nobody', role: 'discovery', ttlSeconds: 60 }),
      ),
      'NOT_FOUND',
    );
    expect(tenant.details.path).toEqual(['tenantId']);
    const site = await computeErrorOf(
      h.scratch.db.transaction((tx) =>
        h.pki.issueJoinToken(tx, { tenantId: 'root', role: 'discovery', siteId: 'site_acme', ttlSeconds: 60 }),
      ),
      'NOT_FOUND',
    );
    expect(site.details.path).toEqual(['siteId']);
  });
});

describe('issuing a join token as a secret', () => {
  const count = async (table: string) =>
    Number((await h.scratch.db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n);

  it("stores the token sealed in the secret's tenant and returns only the reference; the token joins", async () => {
    const { id, ref } = await h.scratch.db.transaction((tx) =>
      h.pki.issueJoinTokenSecret(tx, {
        tenantId: 'acme',
        role: 'discovery',
        siteId: 'site_acme',
        ttlSeconds: 600,
        maxUses: 1,
        secretTenantId: 'root',
      }),
    );
    expect(id).toMatch(/^tok_/);
    expect(ref).toMatch(/^sec_/);
    const token = await h.pki.secrets(h.scratch.db).resolve(ref);
    h.plaintexts.push(token, token.split('.')[1] ?? token);
    expect(token.startsWith(`${id}.`)).toBe(true);
    const { rows } = await h.scratch.db.query<{ tenant_id: string }>(
      'SELECT tenant_id FROM pki_secrets WHERE id = $1',
      [ref],
    );
    expect(rows[0]?.tenant_id).toBe('root');
    expect(await findPlaintext(h.scratch.db, [token.split('.')[1] ?? token])).toEqual([]);
    const joined = await join({ token });
    expect(joined.nodeId).toMatch(/^node_/);
    expect(await uses(id)).toBe(1);
  });

  it('writes neither the token nor the secret when a tenant, site or node is unknown', async () => {
    const before = [await count('pki_join_tokens'), await count('pki_secrets')];
    const base = { tenantId: 'acme', role: 'discovery', siteId: 'site_acme', ttlSeconds: 60 } as const;
    const refusals = [
      [{ ...base, secretTenantId: 'nobody' }, ['secretTenantId']],
      [{ ...base, tenantId: 'nobody', secretTenantId: 'root' }, ['tenantId']],
      [{ ...base, siteId: 'site_root', secretTenantId: 'root' }, ['siteId']],
    ] as const;
    for (const [input, path] of refusals) {
      const error = await computeErrorOf(
        h.scratch.db.transaction((tx) => h.pki.issueJoinTokenSecret(tx, input)),
        'NOT_FOUND',
      );
      expect(error.details.path).toEqual(path);
    }
    expect([await count('pki_join_tokens'), await count('pki_secrets')]).toEqual(before);
  });

  it('refuses bad input with INVALID_INPUT at its path', async () => {
    const error = await computeErrorOf(
      h.scratch.db.transaction((tx) =>
        h.pki.issueJoinTokenSecret(tx, { tenantId: 'acme', role: 'node', ttlSeconds: 60, secretTenantId: 'root' }),
      ),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['nodeId']);
    const tenant = await computeErrorOf(
      h.scratch.db.transaction((tx) =>
        h.pki.issueJoinTokenSecret(tx, {
          tenantId: 'acme',
          role: 'discovery',
          ttlSeconds: 60,
          secretTenantId: 5 as unknown as string,
        }),
      ),
      'INVALID_INPUT',
    );
    expect(tenant.details.path).toEqual(['secretTenantId']);
  });
});

describe("staging a join token as a secret, for the caller's own commit", () => {
  const count = async (table: string) =>
    Number((await h.scratch.db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n);
  // A commit of the caller's own: its gate writes a marker row, and the staged token and secret go with it.
  const commitWith = (write: StagedWrite, marker: string) =>
    commit(
      { sql: h.scratch.db, clock: h.clock, commands: {} as never, events: {} as never },
      {
        changes: [
          {
            name: 'marker',
            sql: ({ bind, guard }) =>
              `INSERT INTO tenants (id, name, created_at) SELECT ${bind(marker)}, ${bind(marker)}, now() WHERE ${guard} RETURNING id`,
          },
          ...write.changes,
        ],
      },
    );
  const base = { tenantId: 'acme', role: 'discovery', siteId: 'site_acme', ttlSeconds: 600, maxUses: 1 } as const;

  it("is written by the caller's statement with its gate: the reference resolves to the token, which joins", async () => {
    const { id, ref, write } = h.pki.port(h.scratch.db).stageJoinTokenSecret!({ ...base, secretTenantId: 'root' });
    expect((await h.scratch.db.query('SELECT 1 FROM pki_join_tokens WHERE id = $1', [id])).rowCount).toBe(0);
    expect((await commitWith(write, 'marker-1')).status).toBe('committed');
    const token = await h.pki.secrets(h.scratch.db).resolve(ref);
    h.plaintexts.push(token, token.split('.')[1] ?? token);
    expect(token.startsWith(`${id}.`)).toBe(true);
    expect(await findPlaintext(h.scratch.db, [token.split('.')[1] ?? token])).toEqual([]);
    expect((await join({ token })).nodeId).toMatch(/^node_/);
  });

  it('makes the whole commit stale when a tenant, site or node it names is unknown, and write() says which', async () => {
    const before = [await count('pki_join_tokens'), await count('pki_secrets'), await count('tenants')];
    const refusals = [
      [{ ...base, secretTenantId: 'nobody' }, ['secretTenantId']],
      [{ ...base, tenantId: 'nobody', secretTenantId: 'root' }, ['tenantId']],
      [{ ...base, siteId: 'site_root', secretTenantId: 'root' }, ['siteId']],
      [{ ...base, role: 'node', nodeId: 'node_nobody', secretTenantId: 'root' }, ['nodeId']],
    ] as const;
    for (const [input, path] of refusals) {
      const { write } = h.pki.port(h.scratch.db).stageJoinTokenSecret!(input);
      expect((await commitWith(write, 'marker-stale')).status).toBe('stale');
      const error = await computeErrorOf(
        h.scratch.db.transaction((tx) => write.write(tx)),
        'NOT_FOUND',
      );
      expect(error.details.path).toEqual(path);
    }
    // Neither the caller's gate row nor the token nor the secret.
    expect([await count('pki_join_tokens'), await count('pki_secrets'), await count('tenants')]).toEqual(before);
  });

  it('refuses bad input with INVALID_INPUT at its path before anything is written', () => {
    const port = h.pki.port(h.scratch.db);
    const error = (() => {
      try {
        port.stageJoinTokenSecret!({ tenantId: 'acme', role: 'node', ttlSeconds: 60, secretTenantId: 'root' });
      } catch (caught) {
        return caught;
      }
    })();
    expect(isComputeError(error) && error.code === 'INVALID_INPUT' && error.details.path).toEqual(['nodeId']);
  });
});

describe("staging a join token for the caller's own commit, its value returned", () => {
  const count = async () =>
    Number((await h.scratch.db.query<{ n: string }>('SELECT count(*) AS n FROM pki_join_tokens')).rows[0]?.n);
  const commitWith = (write: StagedWrite, holds: boolean) =>
    commit(
      { sql: h.scratch.db, clock: h.clock, commands: {} as never, events: {} as never },
      {
        changes: [
          { name: 'gate', sql: ({ guard }) => `SELECT 1 AS held WHERE ${holds} AND ${guard}` },
          ...write.changes,
        ],
      },
    );
  const base = { tenantId: 'acme', role: 'discovery', siteId: 'site_acme', ttlSeconds: 600, maxUses: 1 } as const;

  it("is written only with the caller's gate, and the value it returned then joins", async () => {
    const { id, token, write } = h.pki.port(h.scratch.db).stageJoinToken!(base);
    h.plaintexts.push(token, token.split('.')[1] ?? token);
    expect(token.startsWith(`${id}.`)).toBe(true);
    const before = await count();
    expect((await commitWith(write, false)).status).toBe('stale');
    expect(await count()).toBe(before);
    expect((await commitWith(write, true)).status).toBe('committed');
    expect(await findPlaintext(h.scratch.db, [token.split('.')[1] ?? token])).toEqual([]);
    expect((await join({ token })).nodeId).toMatch(/^node_/);
  });

  it('makes the commit stale for an unknown tenant, site or node, which write() names', async () => {
    const before = await count();
    const refusals = [
      [{ ...base, tenantId: 'nobody' }, ['tenantId']],
      [{ ...base, siteId: 'site_root' }, ['siteId']],
      [{ ...base, role: 'node', nodeId: 'node_nobody' }, ['nodeId']],
    ] as const;
    for (const [input, path] of refusals) {
      const { write } = h.pki.port(h.scratch.db).stageJoinToken!(input);
      expect((await commitWith(write, true)).status).toBe('stale');
      const error = await computeErrorOf(
        h.scratch.db.transaction((tx) => write.write(tx)),
        'NOT_FOUND',
      );
      expect(error.details.path).toEqual(path);
    }
    expect(await count()).toBe(before);
    const error = await computeErrorOf(
      Promise.resolve().then(() => h.pki.port(h.scratch.db).stageJoinToken!({ ...base, ttlSeconds: 0 })),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['ttlSeconds']);
  });
});

describe('joining', () => {
  it('a discovery join creates an enrolling machine in the token tenant and site and returns a certificate', async () => {
    const { token } = await issueTracked(h, {
      tenantId: 'acme',
      role: 'discovery',
      siteId: 'site_acme',
      poolId: 'pool-a',
      ttlSeconds: 600,
    });
    const joined = await join({ token, claims: { mac: ['52:54:00:00:00:01'] } });
    expect(joined.role).toBe('discovery');
    expect(joined.certificatePem).toContain('BEGIN CERTIFICATE');
    expect(joined.caCertificatePem).toContain('BEGIN CERTIFICATE');
    const { rows } = await h.scratch.db.query<Record<string, unknown>>('SELECT * FROM nodes WHERE id = $1', [
      joined.nodeId,
    ]);
    expect(rows[0]).toMatchObject({
      tenant_id: 'acme',
      site_id: 'site_acme',
      pool_id: 'pool-a',
      kind: 'machine',
      provision_state: 'enrolling',
    });
  });

  it('a join whose claims do not match expect is refused without spending the token', async () => {
    const { id, token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 600,
      maxUses: 1,
      expect: { mac: '52:54:00:AA:BB:CC', serial: 'SN-1' },
    });
    const error = await computeErrorOf(
      join({ token, claims: { mac: '52:54:00:aa:bb:cd', serial: 'SN-1' } }),
      'PERMISSION_DENIED',
    );
    expect(error.details).toMatchObject({ reason: 'claims-mismatch', path: ['claims', 'mac'] });
    expect(await uses(id)).toBe(0);
    await computeErrorOf(join({ token, claims: {} }), 'PERMISSION_DENIED');
    expect(await uses(id)).toBe(0);
    // Case and separators do not matter; one of several MACs is enough.
    const joined = await join({ token, claims: { mac: ['00:11:22:33:44:55', '52-54-00-aa-bb-cc'], serial: 'SN-1' } });
    expect(joined.nodeId).toMatch(/^node_/);
    expect(await uses(id)).toBe(1);
  });

  it('refuses a token past its ttl under the clock as token-expired', async () => {
    const { token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 60,
    });
    h.clock.advance(59_000);
    await join({ token });
    h.clock.advance(1_000);
    const error = await computeErrorOf(join({ token }), 'UNAUTHENTICATED');
    expect(error.details.reason).toBe('token-expired');
  });

  it('refuses a token with no uses left as token-exhausted', async () => {
    const { token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 60,
      maxUses: 2,
    });
    await join({ token });
    await join({ token });
    const other = generateSigningKeyPair('ed25519');
    const error = await computeErrorOf(join({ token, publicKey: other.publicJwk }), 'UNAUTHENTICATED');
    expect(error.details.reason).toBe('token-exhausted');
  });

  it('answers a spent token presented again with the same key and claims: the same certificate, within 10 minutes', async () => {
    const { id, token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 3600,
      maxUses: 1,
    });
    const key = generateSigningKeyPair('ed25519');
    const first = await join({ token, publicKey: key.publicJwk });
    // The answer was lost: the agent asks again with the same token and key (here as SPKI PEM rather than JWK).
    const again = await join({ token, publicKey: key.publicKeyPem });
    expect(again).toEqual(first);
    expect(await uses(id)).toBe(1);
    const issued = await h.scratch.db.query('SELECT serial FROM pki_certificates WHERE join_token_id = $1', [id]);
    expect(issued.rows).toHaveLength(1);
    // Another key with the same token gets nothing.
    const stranger = generateSigningKeyPair('ed25519');
    const refused = await computeErrorOf(join({ token, publicKey: stranger.publicJwk }), 'UNAUTHENTICATED');
    expect(refused.details.reason).toBe('token-exhausted');
    // After the window, the spent token is refused even to the same key.
    h.clock.advance(10 * 60_000 + 1);
    const late = await computeErrorOf(join({ token, publicKey: key.publicJwk }), 'UNAUTHENTICATED');
    expect(late.details.reason).toBe('token-exhausted');
  });

  it('does not answer again a certificate that was revoked since (a later join of the node supersedes it)', async () => {
    const { token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 3600,
      maxUses: 1,
    });
    const first = await join({ token });
    await h.scratch.db.transaction((tx) => h.pki.revokeCertificate(tx, first.serial, 'key-compromise'));
    const error = await computeErrorOf(join({ token }), 'UNAUTHENTICATED');
    expect(error.details.reason).toBe('token-exhausted');
  });

  it('refuses a revoked token as token-revoked', async () => {
    const { id, token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 60,
    });
    await h.scratch.db.transaction((tx) => h.pki.revokeJoinToken(tx, id));
    const error = await computeErrorOf(join({ token }), 'UNAUTHENTICATED');
    expect(error.details.reason).toBe('token-revoked');
  });

  it.each([
    ['garbage', 'not-a-token'],
    ['an empty string', ''],
    ['a number', 12],
  ])('refuses %s as token-unknown', async (_name, token) => {
    const error = await computeErrorOf(join({ token }), 'UNAUTHENTICATED');
    expect(error.details).toMatchObject({ reason: 'token-unknown', path: ['token'] });
  });

  it('refuses the right id with a wrong secret as token-unknown', async () => {
    const { id } = await issueTracked(h, { tenantId: 'root', role: 'discovery', siteId: 'site_root', ttlSeconds: 60 });
    const error = await computeErrorOf(join({ token: `${id}.${'A'.repeat(43)}` }), 'UNAUTHENTICATED');
    expect(error.details.reason).toBe('token-unknown');
  });

  it('refuses a malformed public key or claims with INVALID_INPUT before spending anything', async () => {
    const { id, token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 60,
      maxUses: 1,
    });
    const key = await computeErrorOf(
      join({ token, publicKey: '-----BEGIN PUBLIC KEY-----\nzz\n-----END PUBLIC KEY-----' }),
      'INVALID_INPUT',
    );
    expect(key.details.path).toEqual(['publicKey']);
    const claims = await computeErrorOf(join({ token, claims: { mac: [7] } }), 'INVALID_INPUT');
    expect(claims.details.path).toEqual(['claims', 'mac', 0]);
    expect(await uses(id)).toBe(0);
  });
});

describe('attestors', () => {
  it('a node token binds the pre-registered node it names', async () => {
    const nodeId = await insertNode(h.scratch.db, h.clock, { id: 'node_bound' });
    const { token } = await issueTracked(h, { tenantId: 'root', role: 'node', nodeId, ttlSeconds: 60 });
    const before = await h.scratch.db.query('SELECT count(*)::int AS n FROM nodes');
    const joined = await join({ token });
    expect(joined.nodeId).toBe(nodeId);
    expect(joined.role).toBe('node');
    const after = await h.scratch.db.query('SELECT count(*)::int AS n FROM nodes');
    expect(after.rows).toEqual(before.rows);
  });

  it('a site token creates a site agent of its site', async () => {
    const { token } = await issueTracked(h, { tenantId: 'root', role: 'site', siteId: 'site_root', ttlSeconds: 60 });
    const joined = await join({ token });
    const { rows } = await h.scratch.db.query<Record<string, unknown>>(
      'SELECT kind, site_id FROM nodes WHERE id = $1',
      [joined.nodeId],
    );
    expect(rows[0]).toEqual({ kind: 'site-agent', site_id: 'site_root' });
    expect(joined.siteId).toBe('site_root');
  });

  it('a provisioned token recorded with its node re-keys that node and revokes its earlier certificates', async () => {
    const nodeId = await insertNode(h.scratch.db, h.clock, { id: 'node_reinstalled' });
    const first = await issueTracked(h, { tenantId: 'root', role: 'node', nodeId, ttlSeconds: 60 });
    const ramdisk = await join({ token: first.token });
    const second = await issueTracked(h, { tenantId: 'root', role: 'provisioned', nodeId, ttlSeconds: 60, maxUses: 1 });
    const installed = await join({ token: second.token, publicKey: generateSigningKeyPair('es256').publicKeyPem });
    expect(installed.nodeId).toBe(nodeId);
    expect(installed.role).toBe('provisioned');
    const old = await computeErrorOf(
      h.pki.verifyAgentCertificate(h.scratch.db, ramdisk.certificatePem),
      'UNAUTHENTICATED',
    );
    expect(old.details.reason).toBe('certificate-revoked');
    expect((await h.pki.verifyAgentCertificate(h.scratch.db, installed.certificatePem)).nodeId).toBe(nodeId);
  });

  it("a provisioned token without a node finds it through the step result's joinTokenId", async () => {
    const nodeId = await insertNode(h.scratch.db, h.clock, { id: 'node_from_step' });
    // A stand-in for the provision engine's tables, with the columns the default lookup reads.
    await h.scratch.db.query('CREATE TABLE workflows (id text PRIMARY KEY, node_id text)');
    await h.scratch.db.query('CREATE TABLE workflow_steps (workflow_id text, step_id text, result jsonb)');
    const { id, token } = await issueTracked(h, { tenantId: 'root', role: 'provisioned', ttlSeconds: 60, maxUses: 1 });
    await h.scratch.db.query("INSERT INTO workflows VALUES ('wf_1', $1)", [nodeId]);
    await h.scratch.db.query("INSERT INTO workflow_steps VALUES ('wf_1', 'render', $1::jsonb)", [
      JSON.stringify({ userDataRef: 'sec_x', kind: 'cloud-init', joinTokenId: id }),
    ]);
    try {
      expect((await join({ token })).nodeId).toBe(nodeId);
    } finally {
      await h.scratch.db.query('DROP TABLE workflow_steps');
      await h.scratch.db.query('DROP TABLE workflows');
    }
  });

  it('a provisioned token that maps to no node is refused and keeps its use', async () => {
    const { id, token } = await issueTracked(h, { tenantId: 'root', role: 'provisioned', ttlSeconds: 60, maxUses: 1 });
    const error = await computeErrorOf(join({ token }), 'PERMISSION_DENIED');
    expect(error.details.reason).toBe('attestation-failed');
    expect(await uses(id)).toBe(0);
  });

  it('a replaced attestor decides the node', async () => {
    const nodeId = await insertNode(h.scratch.db, h.clock, { id: 'node_custom' });
    const custom = pki({
      key: h.key,
      clock: h.clock,
      log: h.log,
      attestors: { discovery: async () => ({ nodeId, tenantId: 'root', siteId: 'site_root' }) },
    });
    const { token } = await issueTracked(h, { tenantId: 'root', role: 'discovery', ttlSeconds: 60 });
    const joined = await h.scratch.db.transaction((tx) =>
      custom.joinAgent(tx, { token, publicKey: agentKey.publicKeyPem }),
    );
    expect(joined.nodeId).toBe(nodeId);
  });
});

it('leaves no token in plaintext in any table or log line', async () => {
  // Tokens of its own, so the scan looks for real values whatever ran before: issued and spent by a join, refused on a
  // claims mismatch, revoked, issued as a secret and staged (as a secret and by value) for a commit, each then joined.
  const base = { tenantId: 'root', role: 'discovery', siteId: 'site_root', ttlSeconds: 600, maxUses: 1 } as const;
  await join({ token: (await issueTracked(h, base)).token });
  const mismatched = await issueTracked(h, { ...base, expect: { serial: 'SN-scan' } });
  await computeErrorOf(join({ token: mismatched.token, claims: { serial: 'SN-other' } }), 'PERMISSION_DENIED');
  const revoked = await issueTracked(h, base);
  await h.scratch.db.transaction((tx) => h.pki.revokeJoinToken(tx, revoked.id));
  await computeErrorOf(join({ token: revoked.token }), 'UNAUTHENTICATED');
  const secret = await h.scratch.db.transaction((tx) =>
    h.pki.issueJoinTokenSecret(tx, { ...base, secretTenantId: 'root' }),
  );
  const port = h.pki.port(h.scratch.db);
  const stagedSecret = port.stageJoinTokenSecret!({ ...base, secretTenantId: 'root' });
  const staged = port.stageJoinToken!(base);
  const context = { sql: h.scratch.db, clock: h.clock, commands: {} as never, events: {} as never };
  const gate: CommitChange = { name: 'gate', sql: ({ guard }) => `SELECT 1 AS held WHERE ${guard}` };
  for (const { write } of [stagedSecret, staged]) {
    expect((await commit(context, { changes: [gate, ...write.changes] })).status).toBe('committed');
  }
  for (const ref of [secret.ref, stagedSecret.ref]) {
    const token = await h.pki.secrets(h.scratch.db).resolve(ref);
    h.plaintexts.push(token, token.split('.')[1] ?? token);
    await join({ token });
  }
  h.plaintexts.push(staged.token, staged.token.split('.')[1] ?? staged.token);
  await join({ token: staged.token });
  expect(h.plaintexts.length).toBeGreaterThan(10);
  expect(await findPlaintext(h.scratch.db, h.plaintexts)).toEqual([]);
  expect(h.log.lines.length).toBeGreaterThan(0);
  expect(findInLogs(h.log, h.plaintexts)).toEqual([]);
});
