import { type CommitChange, commit } from '@better-compute/core/kernel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeClock, findInLogs, findPlaintext, insertNode, scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness } from '../support/harness';

let h: Harness;
let commandSeq = 0;

beforeAll(async () => {
  h = await createHarness(await scratchPglite());
  await insertNode(h.scratch.db, h.clock, { id: 'node_agent' });
  await insertNode(h.scratch.db, h.clock, { id: 'node_other' });
  await insertNode(h.scratch.db, h.clock, { id: 'node_acme', tenantId: 'acme', siteId: 'site_acme' });
});
afterAll(() => h.scratch.drop());

async function put(tenantId: string, value: string): Promise<string> {
  h.plaintexts.push(value);
  return h.pki.secrets(h.scratch.db).put(tenantId, value);
}

async function command(input: {
  nodeId?: string;
  tenantId?: string;
  key?: string;
  state?: string;
  payload: unknown;
  notAfterMs?: number;
}) {
  commandSeq += 1;
  const clock: FakeClock = h.clock;
  await h.scratch.db.query(
    `INSERT INTO commands (id, tenant_id, node_id, kind, payload, key, state, not_after, created_at, updated_at)
     VALUES ($1, $2, $3, 'deploy.deploy', $4::jsonb, $5, $6, $7, $8, $8)`,
    [
      `cmd_${commandSeq}`,
      input.tenantId ?? 'root',
      input.nodeId ?? 'node_agent',
      JSON.stringify(input.payload),
      input.key ?? `wf:wf_${commandSeq}:deploy#1:image`,
      input.state ?? 'dispatched',
      new Date(clock.now().getTime() + (input.notAfterMs ?? 60_000)),
      clock.now(),
    ],
  );
}

const fetchAs = (agentNodeId: string, ref: string) => h.pki.fetchSecretForAgent(h.scratch.db, { agentNodeId, ref });

describe('the secret broker', () => {
  it('stores a value encrypted and resolves it by a sec_ reference', async () => {
    const ref = await put('root', 'password-for-bmc-1');
    expect(ref).toMatch(/^sec_[0-9a-z]{26}$/);
    expect(await h.pki.secrets(h.scratch.db).resolve(ref)).toBe('password-for-bmc-1');
    const { rows } = await h.scratch.db.query<{ sealed_value: string }>(
      'SELECT sealed_value FROM pki_secrets WHERE id = $1',
      [ref],
    );
    expect(rows[0]?.sealed_value).toMatch(/^v1\./);
  });

  it('deletes a value; resolving it then is NOT_FOUND', async () => {
    const secrets = h.pki.secrets(h.scratch.db);
    const ref = await put('root', 'short-lived-value');
    await secrets.delete(ref);
    const error = await computeErrorOf(secrets.resolve(ref), 'NOT_FOUND');
    expect(error.details.path).toEqual(['ref']);
  });

  it("stages a deletion for a caller's commit: written only with the commit's gate, or alone in a transaction", async () => {
    const secrets = h.pki.secrets(h.scratch.db);
    const [a, b, c] = [await put('root', 'one'), await put('root', 'two'), await put('root', 'three')];
    const staged = secrets.stageDelete([a, b]);
    const left = async () =>
      (
        await h.scratch.db.query<{ id: string }>('SELECT id FROM pki_secrets WHERE id = ANY($1::text[]) ORDER BY id', [
          [a, b, c],
        ])
      ).rows.map((r) => r.id);
    const gate = (holds: boolean): CommitChange => ({
      name: 'gate',
      sql: ({ guard }) => `SELECT 1 AS held WHERE ${holds} AND ${guard}`,
    });
    // A commit of changes only: it sends no command and publishes no event.
    const ctx = { sql: h.scratch.db, clock: h.clock, commands: {} as never, events: {} as never };
    expect((await commit(ctx, { changes: [gate(false), ...staged.changes] })).status).toBe('stale');
    expect(await left()).toEqual([a, b, c].sort());
    expect((await commit(ctx, { changes: [gate(true), ...staged.changes] })).status).toBe('committed');
    expect(await left()).toEqual([c]);
    // Alone, and again for references already gone: no error.
    await h.scratch.db.transaction((tx) => secrets.stageDelete([a, c]).write(tx));
    expect(await left()).toEqual([]);
    const error = await computeErrorOf(
      Promise.resolve().then(() => secrets.stageDelete([a, 'nope'])),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['refs', 1]);
  });

  it("stages a value for a caller's commit: stored only with the commit's gate and in a tenant that exists", async () => {
    const secrets = h.pki.secrets(h.scratch.db);
    const ctx = { sql: h.scratch.db, clock: h.clock, commands: {} as never, events: {} as never };
    const gate = (holds: boolean): CommitChange => ({
      name: 'gate',
      sql: ({ guard }) => `SELECT 1 AS held WHERE ${holds} AND ${guard}`,
    });
    const stored = async (ref: string) =>
      (await h.scratch.db.query('SELECT 1 FROM pki_secrets WHERE id = $1', [ref])).rowCount;
    const held = secrets.stagePut('root', 'staged-value');
    expect((await commit(ctx, { changes: [gate(false), ...held.write.changes] })).status).toBe('stale');
    expect(await stored(held.ref)).toBe(0);
    expect((await commit(ctx, { changes: [gate(true), ...held.write.changes] })).status).toBe('committed');
    expect(await secrets.resolve(held.ref)).toBe('staged-value');
    // Sealed like any other value: the plaintext is not in the row.
    expect(await findPlaintext(h.scratch.db, ['staged-value'])).toEqual([]);
    const nowhere = secrets.stagePut('nobody', 'lost');
    expect((await commit(ctx, { changes: [gate(true), ...nowhere.write.changes] })).status).toBe('stale');
    const tenant = await computeErrorOf(
      h.scratch.db.transaction((tx) => nowhere.write.write(tx)),
      'NOT_FOUND',
    );
    expect(tenant.details.path).toEqual(['tenantId']);
    const alone = secrets.stagePut('root', 'written alone');
    await h.scratch.db.transaction((tx) => alone.write.write(tx));
    expect(await secrets.resolve(alone.ref)).toBe('written alone');
    const value = await computeErrorOf(
      Promise.resolve().then(() => secrets.stagePut('root', 42 as never)),
      'INVALID_INPUT',
    );
    expect(value.details.path).toEqual(['value']);
  });

  it('refuses malformed references and values with INVALID_INPUT at their path', async () => {
    const secrets = h.pki.secrets(h.scratch.db);
    expect((await computeErrorOf(secrets.resolve('sec_nope'), 'INVALID_INPUT')).details.path).toEqual(['ref']);
    expect((await computeErrorOf(secrets.put('root', 42 as never), 'INVALID_INPUT')).details.path).toEqual(['value']);
    expect((await computeErrorOf(secrets.put('nobody', 'x'), 'NOT_FOUND')).details.path).toEqual(['tenantId']);
  });

  it('does not open a value whose ciphertext was moved to another row', async () => {
    const a = await put('root', 'value-of-a');
    const b = await put('root', 'value-of-b');
    await h.scratch.db.query(
      'UPDATE pki_secrets SET sealed_value = (SELECT sealed_value FROM pki_secrets WHERE id = $1) WHERE id = $2',
      [a, b],
    );
    await computeErrorOf(h.pki.secrets(h.scratch.db).resolve(b), 'INTERNAL');
  });
});

describe('agents fetching secrets', () => {
  it('get a value while a live step command for them carries the reference anywhere in its body', async () => {
    const ref = await put('root', 'rendered-user-data-1');
    await command({ payload: { boot: { entries: [{ userData: { ref } }] } } });
    expect(await fetchAs('node_agent', ref)).toBe('rendered-user-data-1');
  });

  it.each(['wf:wf_a:render', 'wf:wf_a:render#3', 'wf:wf_a:render:media', 'wf:wf_a:render#2:media'])(
    'accept the step command key %s',
    async (key) => {
      const ref = await put('root', `value-for-${key}`);
      await command({ key, payload: { ref } });
      expect(await fetchAs('node_agent', ref)).toBe(`value-for-${key}`);
    },
  );

  it('naming the command (commandId), get a value only when that one command carries it', async () => {
    const ref = await put('root', 'bmc-password-named');
    await command({ payload: { bmc: { credentialRef: ref } } });
    const carrying = `cmd_${commandSeq}`;
    await command({ payload: { bmc: { credentialRef: 'sec_other' } } });
    const other = `cmd_${commandSeq}`;
    const fetchNamed = (commandId: string) =>
      h.pki.fetchSecretForAgent(h.scratch.db, { agentNodeId: 'node_agent', ref, commandId });
    expect(await fetchNamed(carrying)).toBe('bmc-password-named');
    const error = await computeErrorOf(fetchNamed(other), 'NOT_FOUND');
    expect(error.details).toMatchObject({ path: ['ref'], reason: 'not-carried' });
  });

  it('find the carrying command among many settled ones of the same agent', async () => {
    const ref = await put('root', 'bmc-password-busy-site');
    for (let i = 0; i < 50; i += 1) await command({ state: 'succeeded', payload: { bmc: { credentialRef: ref } } });
    await expect(fetchAs('node_agent', ref)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await command({ state: 'running', payload: { bmc: { credentialRef: ref } } });
    expect(await fetchAs('node_agent', ref)).toBe('bmc-password-busy-site');
  });

  it('are refused a reference their command does not carry', async () => {
    const carried = await put('root', 'carried-value');
    const other = await put('root', 'not-carried-value');
    await command({ payload: { ref: carried, note: `${other}-suffix` } });
    const error = await computeErrorOf(fetchAs('node_agent', other), 'NOT_FOUND');
    expect(error.details).toMatchObject({ path: ['ref'], reason: 'not-carried' });
  });

  it("are refused a reference carried by another agent's command", async () => {
    const ref = await put('root', 'for-the-other-node');
    await command({ nodeId: 'node_other', payload: { ref } });
    await computeErrorOf(fetchAs('node_agent', ref), 'NOT_FOUND');
    expect(await fetchAs('node_other', ref)).toBe('for-the-other-node');
  });

  it('are refused when the command is not a workflow step command', async () => {
    const ref = await put('root', 'manual-command-value');
    await command({ key: 'manual:reboot', payload: { ref } });
    await computeErrorOf(fetchAs('node_agent', ref), 'NOT_FOUND');
  });

  it.each(['succeeded', 'failed', 'expired', 'cancelled', 'rejected'])(
    'are refused once the command is %s',
    async (state) => {
      const ref = await put('root', `value-after-${state}`);
      await command({ state, payload: { ref } });
      await computeErrorOf(fetchAs('node_agent', ref), 'NOT_FOUND');
    },
  );

  it('are refused once the command is past not_after under the clock', async () => {
    const ref = await put('root', 'value-until-deadline');
    await command({ payload: { ref }, notAfterMs: 10_000 });
    expect(await fetchAs('node_agent', ref)).toBe('value-until-deadline');
    h.clock.advance(10_000);
    await computeErrorOf(fetchAs('node_agent', ref), 'NOT_FOUND');
  });

  it("are refused another tenant's secret even when their command carries it", async () => {
    const ref = await put('root', 'root-tenant-value');
    await command({ nodeId: 'node_acme', tenantId: 'acme', payload: { ref } });
    await computeErrorOf(fetchAs('node_acme', ref), 'NOT_FOUND');
  });

  it('log refusals and grants with the reference but never the value', async () => {
    const ref = await put('root', 'logged-value-never');
    await computeErrorOf(fetchAs('node_agent', ref), 'NOT_FOUND');
    const refusal = h.log.lines.find((line) => line.includes('secret fetch refused') && line.includes(ref));
    expect(refusal).toContain('node_agent');
    expect(refusal).not.toContain('logged-value-never');
  });

  it('refuse a malformed reference with INVALID_INPUT', async () => {
    const error = await computeErrorOf(fetchAs('node_agent', 'password'), 'INVALID_INPUT');
    expect(error.details.path).toEqual(['ref']);
  });
});

it('leaves no secret value in plaintext in any table or log line', async () => {
  // Values of its own, so the scan looks for real values whatever ran before: put, staged for a commit and written
  // alone, fetched by the agent whose live step command carries them, refused to another agent, named by commandId.
  const secrets = h.pki.secrets(h.scratch.db);
  const granted = await put('root', 'scan-fetched-value');
  const named = await put('root', 'scan-fetched-by-command-id');
  const refused = await put('root', 'scan-refused-value');
  h.plaintexts.push('scan-staged-value', 'scan-written-alone');
  const staged = secrets.stagePut('root', 'scan-staged-value');
  const ctx = { sql: h.scratch.db, clock: h.clock, commands: {} as never, events: {} as never };
  const gate: CommitChange = { name: 'gate', sql: ({ guard }) => `SELECT 1 AS held WHERE ${guard}` };
  expect((await commit(ctx, { changes: [gate, ...staged.write.changes] })).status).toBe('committed');
  const alone = secrets.stagePut('root', 'scan-written-alone');
  await h.scratch.db.transaction((tx) => alone.write.write(tx));
  await command({ payload: { boot: { userData: { ref: granted } }, media: [staged.ref, alone.ref] } });
  await command({ payload: { bmc: { credentialRef: named } } });
  const carrying = `cmd_${commandSeq}`;
  await command({ nodeId: 'node_other', payload: { ref: refused } });
  expect(await fetchAs('node_agent', granted)).toBe('scan-fetched-value');
  expect(await fetchAs('node_agent', staged.ref)).toBe('scan-staged-value');
  expect(await fetchAs('node_agent', alone.ref)).toBe('scan-written-alone');
  const byCommand = { agentNodeId: 'node_agent', ref: named, commandId: carrying };
  expect(await h.pki.fetchSecretForAgent(h.scratch.db, byCommand)).toBe('scan-fetched-by-command-id');
  await computeErrorOf(fetchAs('node_agent', refused), 'NOT_FOUND');
  // Its own five at least, and whatever values the tests that ran before it put.
  expect(h.plaintexts.length).toBeGreaterThanOrEqual(5);
  expect(await findPlaintext(h.scratch.db, h.plaintexts)).toEqual([]);
  expect(h.log.lines.some((line) => line.includes('secret fetched by agent'))).toBe(true);
  expect(findInLogs(h.log, h.plaintexts)).toEqual([]);
});
