// The engine samples of steps-and-profiles.md, as written there, run against a real compute on PGlite.
import { betterCompute, definePlugin, field, manifest, type SqlExecutor } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import {
  awaitCommand,
  defineProfile,
  defineStep,
  getWorkflow,
  provisionModule,
  type StepContext,
  siteAgentFor,
  stepNotReady,
} from 'better-compute/provision';
import { createFakeAgent, createFakeClock, insertNode, insertSite, settle } from 'better-compute/testkit';
import { describe, expect, it } from 'vitest';

// steps/acme-reserve-ip.ts: find before create, over the plugin's own table.
async function nextFreeIp(tx: SqlExecutor): Promise<string> {
  const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM plg_acme_ips');
  return `192.0.2.${10 + rows[0].n}`;
}

const reserveIp = defineStep({
  id: 'acme.reserveIp',
  runsOn: 'control-plane',
  timeout: '1m',
  retrySafe: true,
  input: manifest({}),
  async run(input, ctx) {
    return ctx.sql.transaction(async (tx) => {
      const { rows } = await tx.query('SELECT ip FROM plg_acme_ips WHERE step_key = $1', [ctx.idempotencyKey]);
      if (rows[0]) return rows[0]; // a re-run after a crash finds the first run's work
      const ip = await nextFreeIp(tx); // your allocator, over your plugin's own tables
      await tx.query('INSERT INTO plg_acme_ips (step_key, ip) VALUES ($1, $2)', [ctx.idempotencyKey, ip]);
      return { ip };
    });
  },
});

// The built-in waits' shape (Waiting).
const waitObserved = defineStep({
  id: 'acme.waitObserved',
  runsOn: 'control-plane',
  timeout: '10m',
  retrySafe: true,
  input: manifest({}),
  async run(input, ctx) {
    const { rows } = await ctx.sql.query('SELECT generation, observed_generation FROM nodes WHERE id = $1', [
      ctx.node!.id,
    ]);
    if (Number(rows[0].observed_generation) < Number(rows[0].generation)) throw stepNotReady(5_000);
    return { generation: Number(rows[0].generation) };
  },
});

// A relaying helper shaped like metal's httpViaSite: one HTTP request made by the node's site agent.
async function httpViaSite(ctx: StepContext, request: { url: string; poll?: boolean }): Promise<{ version: string }> {
  const agent = await siteAgentFor(ctx.sql, ctx.node!.id);
  if (!agent) throw stepNotReady(2_000);
  const { result } = await awaitCommand(ctx, {
    nodeId: agent.nodeId,
    kind: 'site.httpProxy',
    payload: { url: request.url },
    targetNodeId: ctx.node!.id,
  });
  return JSON.parse(new TextDecoder().decode(result));
}
const address = '192.0.2.10';

// acme-talos.ts (Relaying under the quorum).
const talosReady = defineStep({
  id: 'wait.talosReady',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['site.httpProxy'], // httpViaSite enqueues site.httpProxy, a destructive kind
  timeout: '20m',
  retrySafe: true,
  input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) }),
  async run(input, ctx) {
    const response = await httpViaSite(ctx, { url: `https://${address}:${input.port}/machine/version`, poll: true });
    return { talos: response.version };
  },
});

const talos = defineProfile({
  id: 'talos-1.8',
  version: 1,
  target: 'metal',
  steps: [{ use: 'acme.reserveIp' }, { use: 'acme.waitObserved' }, { use: 'wait.talosReady', on: 'site' }],
});

const acmeSite = definePlugin({
  id: 'acme-site',
  migrations: [{ name: '0000_ips', sql: 'CREATE TABLE plg_acme_ips (step_key text PRIMARY KEY, ip text NOT NULL)' }],
  commandKinds: [{ name: 'site.httpProxy', payload: manifest({ url: field.string() }), destructive: true }],
  extensions: [reserveIp, waitObserved],
});

describe('the steps-and-profiles.md samples', () => {
  it('run as written: find-before-create, a wait, and a relaying step answered by a site agent', async () => {
    // siteAgentFor without a clock judges sessions by the system clock, so the fake clock starts at the real time.
    const clock = createFakeClock(new Date());
    // 1. Directly: provision registers talosReady as its own; 2. as a plugin: it borrows acme-site's steps.
    const provision = provisionModule({ steps: [talosReady], profiles: [talos], modules: [acmeSite] });
    const database = await createPgliteDatabase();
    const compute = await betterCompute({ database, clock, modules: [provision], plugins: [acmeSite] });
    try {
      const siteId = await insertSite(database, {}, clock);
      const nodeId = await insertNode(database, { siteId }, clock);
      const siteAgent = createFakeAgent(compute, {
        nodeId: await insertNode(database, { siteId, kind: 'site-agent' }, clock),
        role: 'site',
      });
      await siteAgent.connect();
      siteAgent.respond('site.httpProxy', { outcome: 'succeed', result: { version: 'v1.8.3' } });
      await database.query('UPDATE nodes SET generation = 2 WHERE id = $1', [nodeId]);
      const { id } = await database.transaction((tx) =>
        compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'talos-1.8', profileVersion: 1, nodeId }),
      );
      await compute.runDueWork();
      expect((await getWorkflow(database, { workflowId: id })).stepId).toBe('main.2'); // waiting for the daemon
      await database.query('UPDATE nodes SET observed_generation = 2 WHERE id = $1', [nodeId]);
      await settle(compute, { clock, agents: [siteAgent] });
      const wf = await getWorkflow(database, { workflowId: id });
      expect(wf.state).toBe('succeeded');
      expect(wf.steps.map((s) => s.result)).toEqual([{ ip: '192.0.2.10' }, { generation: 2 }, { talos: 'v1.8.3' }]);
      expect(wf.commandKinds).toEqual(['site.httpProxy']);
      expect(siteAgent.answered.map((a) => a.kind)).toEqual(['site.httpProxy']);
    } finally {
      await compute.close();
      await database.close();
    }
  });
});
