import * as v from 'valibot';
import { afterEach, describe, expect, it } from 'vitest';
import { openAgentSession } from '../src/agents';
import { createCredential, defineApiGroup, defineApiMethod, resolveTenantResource } from '../src/api';
import type { Clock } from '../src/clock';
import type { CommandPolicy } from '../src/commands';
import { ComputeError } from '../src/errors';
import { betterCompute, type Compute, type ComputeModule, definePlugin } from '../src/kernel';
import { field, manifest } from '../src/manifest';
import { createPgliteDatabase } from '../src/pglite';
import type { SqlDatabase } from '../src/sql';
import { createWorkQueue } from '../src/work';

let compute: Compute | undefined;
let database: SqlDatabase | undefined;
afterEach(async () => {
  await compute?.close();
  await database?.close();
  compute = undefined;
  database = undefined;
});

const t0 = new Date('2026-03-01T00:00:00Z');
const clock: Clock = { now: () => t0 };

async function refusal(promise: Promise<unknown>): Promise<ComputeError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ComputeError);
  return err as ComputeError;
}

describe('betterCompute', () => {
  it('starts on an in-memory PGlite by default, with the root tenant and the kernel tables', async () => {
    compute = await betterCompute({ clock });
    expect(compute.database.backend).toBe('pglite');
    const { rows } = await compute.database.query<{ id: string }>('SELECT id FROM tenants');
    expect(rows).toEqual([{ id: 'root' }]);
  });

  it('applies a plugin’s migrations after the kernel’s and runs its init with the context', async () => {
    const seen: string[] = [];
    const acme = definePlugin({
      id: 'acme',
      migrations: [
        { name: '0000_ips', sql: 'CREATE TABLE plg_acme_ips (step_key text PRIMARY KEY, ip text NOT NULL)' },
      ],
      init: async (ctx) => {
        await ctx.sql.query("INSERT INTO plg_acme_ips VALUES ('k', '10.0.0.1')");
        seen.push(ctx.clock.now().toISOString());
      },
    });
    compute = await betterCompute({ plugins: [acme], clock });
    expect(seen).toEqual([t0.toISOString()]);
    const { rows } = await compute.database.query('SELECT ip FROM plg_acme_ips');
    expect(rows).toEqual([{ ip: '10.0.0.1' }]);
  });

  it("records the modules' wakeOnAgentSession, so opening a node's session queues them keyed by the node", async () => {
    const wait = definePlugin({
      id: 'acme',
      reconcilers: { 'acme.wait': async () => undefined },
      wakeOnAgentSession: ['acme.wait'],
    });
    database = await createPgliteDatabase();
    compute = await betterCompute({ database, plugins: [wait], clock, shards: 8 });
    const { rows } = await database.query('SELECT kind, shards FROM agent_session_wakes');
    expect(rows).toEqual([{ kind: 'acme.wait', shards: 8 }]);
    await database.query(
      "INSERT INTO nodes (id, tenant_id, kind, created_at, updated_at) VALUES ('node_1', 'root', 'machine', $1, $1)",
      [t0],
    );
    await database.transaction((tx) => openAgentSession(tx, { nodeId: 'node_1', role: 'node', bootId: 'b1', clock }));
    const items = await database.query('SELECT kind, key, not_before FROM work_items WHERE key = $1', ['node_1']);
    expect(items.rows).toEqual([{ kind: 'acme.wait', key: 'node_1', not_before: t0 }]);
  });

  it('refuses a duplicate module, naming both, and opens nothing', async () => {
    const err = await refusal(betterCompute({ modules: [{ id: 'metal' }], plugins: [definePlugin({ id: 'metal' })] }));
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toContain("modules[1] 'metal'");
    expect(err.message).toContain("plugins[0] 'metal'");
  });

  it('refuses a module that takes the kernel’s own id', async () => {
    const err = await refusal(betterCompute({ modules: [{ id: 'core' }] }));
    expect(err.code).toBe('INVALID_CONFIG');
  });

  it('refuses a command kind registered by two modules, naming both', async () => {
    const kind = { name: 'acme.wipe', payload: manifest({}), destructive: true };
    const err = await refusal(
      betterCompute({
        modules: [
          { id: 'one', commandKinds: [kind] },
          { id: 'two', commandKinds: [kind] },
        ],
      }),
    );
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toContain('one');
    expect(err.message).toContain('two');
  });

  it('gives modules the pki and secret ports it was given', async () => {
    const pki = { issueJoinToken: async () => ({ id: 'tok_x', token: 'secret' }) };
    const secrets = { put: async () => 'sec_x', resolve: async () => 'value' };
    let ports: unknown[] = [];
    const probe: ComputeModule = {
      id: 'probe',
      init: (ctx) => {
        ports = [ctx.pki, ctx.secrets];
      },
    };
    compute = await betterCompute({ modules: [probe], pki, secrets });
    expect(ports).toEqual([pki, secrets]);
  });

  it('runs a module’s reconciler for work it enqueued, with runDueWork', async () => {
    const handled: string[] = [];
    const sweeper: ComputeModule = {
      id: 'sweeper',
      reconcilers: {
        'sweeper.visit': async (key) => {
          handled.push(key);
          return undefined;
        },
      },
      init: (ctx) => ctx.sql.transaction((tx) => ctx.work.enqueue(tx, { kind: 'sweeper.visit', key: 'node_a' })),
    };
    compute = await betterCompute({ modules: [sweeper], clock });
    await compute.runDueWork();
    expect(handled).toEqual(['node_a']);
    await compute.runDueWork();
    expect(handled).toEqual(['node_a']);
  });

  it('gives modules a work queue that knows which kinds have a reconciler', async () => {
    const sweeper: ComputeModule = { id: 'sweeper', reconcilers: { 'sweeper.visit': async () => undefined } };
    compute = await betterCompute({ modules: [sweeper], clock });
    const { work } = compute.context;
    expect(['sweeper.visit', 'sweeper.typo'].map((kind) => work.handles?.(kind))).toEqual([true, false]);
    // A queue made without kinds does not claim to know.
    expect(createWorkQueue({ clock }).handles).toBeUndefined();
  });

  it('passes every enqueued command through the modules’ command policies', async () => {
    const refuseWipes: CommandPolicy = async (_tx, command, kind) => {
      if (kind.destructive) throw new ComputeError('INVALID_STATE', 'no', { details: { reason: 'batch-required' } });
      void command;
    };
    const module: ComputeModule = {
      id: 'guard',
      commandPolicy: refuseWipes,
      commandKinds: [
        { name: 'guard.wipe', payload: manifest({ disk: field.string() }), destructive: true },
        { name: 'guard.ping', payload: manifest({}) },
      ],
    };
    compute = await betterCompute({ modules: [module], clock });
    await compute.database.query(
      "INSERT INTO nodes (id, tenant_id, kind, created_at, updated_at) VALUES ('node_1', 'root', 'machine', $1, $1)",
      [t0],
    );
    const notAfter = new Date(t0.getTime() + 60_000);
    const { commands } = compute.context;
    const ping = await compute.database.transaction((tx) =>
      commands.enqueue(tx, { nodeId: 'node_1', kind: 'guard.ping', payload: {}, key: 'a', notAfter }),
    );
    expect(ping.state).toBe('pending');
    const err = await refusal(
      compute.database.transaction((tx) =>
        commands.enqueue(tx, { nodeId: 'node_1', kind: 'guard.wipe', payload: { disk: 'sda' }, key: 'b', notAfter }),
      ),
    );
    expect(err.details.reason).toBe('batch-required');
  });

  it('serves a module’s API group through compute.api and over HTTP', async () => {
    const tenants = defineApiGroup('tenants', {
      get: defineApiMethod({
        input: v.object({ tenantId: v.string() }),
        permission: 'compute:tenants:read',
        resource: (input, ctx) => resolveTenantResource(ctx.sql, input.tenantId),
        handler: async (input) => ({ id: input.tenantId }),
      }),
    });
    compute = await betterCompute({ modules: [{ id: 'tenancy', api: { tenants } }] });
    const { token } = await compute.database.transaction((tx) =>
      createCredential(tx, {
        tenantId: 'root',
        name: 'ops',
        permissions: ['compute:tenants:read'],
        clock: compute!.context.clock,
      }),
    );
    await expect(compute.api.tenants?.get?.(token, { tenantId: 'root' })).resolves.toEqual({ id: 'root' });
    const response = await compute.handler(
      new Request('http://localhost/v1/tenants.get', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tenantId: 'nope' }),
      }),
    );
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('runs work with started workers and stops them on close, leaving a given database open', async () => {
    database = await createPgliteDatabase();
    const handled: string[] = [];
    const module: ComputeModule = {
      id: 'visits',
      reconcilers: {
        'visits.visit': async (key) => {
          handled.push(key);
          return undefined;
        },
      },
      init: (ctx) => ctx.sql.transaction((tx) => ctx.work.enqueue(tx, { kind: 'visits.visit', key: 'k1' })),
    };
    compute = await betterCompute({
      database,
      modules: [module],
      workers: { pollMs: 20, heartbeatMs: 50, leaseMs: 500 },
    });
    await compute.startWorkers(1);
    for (let i = 0; i < 200 && handled.length === 0; i += 1) await new Promise((r) => setTimeout(r, 25));
    expect(handled).toEqual(['k1']);
    await compute.close();
    compute = undefined;
    const { rows } = await database.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants');
    expect(rows[0]?.n).toBe(1);
  });

  it('delivers a committed event to a subscriber of compute.events, and never a rolled-back one', async () => {
    compute = await betterCompute({ clock });
    const got: string[] = [];
    const subscription = compute.events.subscribe(
      async (event) => {
        got.push(event.type);
      },
      { tenantId: 'root', pollMs: 20 },
    );
    const { events } = compute.context;
    await compute.database
      .transaction(async (tx) => {
        await events.publish(tx, { tenantId: 'root', subject: 'node/a', type: 'test.rolledBack', data: {} });
        throw new Error('roll back');
      })
      .catch(() => undefined);
    await compute.database.transaction((tx) =>
      events.publish(tx, { tenantId: 'root', subject: 'node/a', type: 'test.committed', data: { n: 1 } }),
    );
    for (let i = 0; i < 100 && got.length === 0; i += 1) await new Promise((r) => setTimeout(r, 20));
    await subscription.unsubscribe();
    expect(got).toEqual(['test.committed']);
  });

  it('fails with the error a module init throws, leaving a database the caller passed open', async () => {
    database = await createPgliteDatabase();
    const failing: ComputeModule = {
      id: 'failing',
      init: () => {
        throw new ComputeError('INVALID_CONFIG', 'missing port', { details: { path: ['pki'] } });
      },
    };
    const err = await refusal(betterCompute({ database, modules: [failing] }));
    expect(err.details.path).toEqual(['pki']);
    // A database the caller passed stays open for the caller.
    await expect(database.query('SELECT 1')).resolves.toMatchObject({ rowCount: 1 });
  });
});
