import { betterCompute, COMPUTE_ERROR_CODES, type Compute, isComputeError, manifest } from 'better-compute/core';
import { storableTextProblem } from 'better-compute/core/checks';
import { listApiMethods } from 'better-compute/core/kernel';
import { metal } from 'better-compute/metal';
import { defineProfile, defineStep, provisionModule } from 'better-compute/provision';
import { createFakeClock, insertSite } from 'better-compute/testkit';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenFor } from './support/api';
import { describeInput, hostility, inputsFor, toJsonText } from './support/api-fuzz';
import { BACKENDS, type ScratchDatabase } from './support/databases';

// The metal and sites groups fed arbitrary input shaped after their own JSON Schemas (and not): whatever comes in, a
// call ends in a result or a documented ComputeError, never INTERNAL, never a raw throw, never a 500 over HTTP, and a
// refused enroll leaves no half-written machine behind.

const RUNS_PER_METHOD = 40;
const SEED = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
const DOCUMENTED = new Set<string>(COMPUTE_ERROR_CODES.filter((code) => code !== 'INTERNAL'));

const okStep = defineStep({
  id: 'mprop.ok',
  runsOn: 'control-plane',
  timeout: '1m',
  retrySafe: true,
  input: manifest({}),
  async run() {
    return null;
  },
});
const PHASES = ['enrolling', 'inspecting', 'commissioning', 'releasing', 'retiring', 'adopting'] as const;
const profiles = [...PHASES, 'deploy'].map((phase) =>
  defineProfile({ id: `mprop.${phase}`, version: 1, target: 'metal', steps: [{ use: 'mprop.ok' }] }),
);

describe.each(BACKENDS)('the metal API on $name, given arbitrary input', ({ create }) => {
  let scratch: ScratchDatabase;
  let compute: Compute;
  let token: string;
  let known: Record<string, string[]>;
  const clock = createFakeClock();

  beforeAll(async () => {
    scratch = await create();
    const bareMetal = metal({ profiles: Object.fromEntries(PHASES.map((phase) => [phase, `mprop.${phase}`])) });
    compute = await betterCompute({
      database: scratch.db,
      clock,
      secrets: {
        put: async () => 'sec_prop',
        resolve: async () => '',
      },
      pki: { issueJoinToken: async () => ({ id: 'tok_prop', token: 'prop-token' }) },
      modules: [provisionModule({ steps: [okStep], profiles, modules: [bareMetal] }), bareMetal],
    });
    token = await tokenFor(scratch.db, clock, 'root', ['compute:*']);
    await tokenFor(scratch.db, clock, 'acme', ['compute:*']);
    const siteId = await insertSite(scratch.db, { name: 'fra1' }, clock);
    const api = compute.api as unknown as Record<string, Record<string, (t: string, i: unknown) => Promise<unknown>>>;
    const machine = (await api.metal?.enroll?.(token, {
      tenantId: 'root',
      siteId,
      bmc: { address: '10.0.0.1', driver: 'ipmi' },
      macs: ['0c:42:a1:00:00:01'],
    })) as { nodeId: string };
    known = {
      tenantId: ['root', 'acme'],
      nodeId: [machine.nodeId],
      siteId: [siteId],
      profileId: ['mprop.deploy'],
    };
    console.info(`metal API property test on ${scratch.url === undefined ? 'PGlite' : 'PostgreSQL'}: seed ${SEED}`);
  });
  afterAll(async () => {
    await compute?.close();
    await scratch?.drop();
  });

  it('answers every metal and sites call with a result or a documented ComputeError, in process and over HTTP', async () => {
    const h = hostility(known);
    const api = compute.api as unknown as Record<string, Record<string, (t: string, i: unknown) => Promise<unknown>>>;
    const outcomes: Record<string, Record<string, number>> = {};
    const methods = listApiMethods(compute.registry.apiGroups).filter(
      ([group]) => group === 'metal' || group === 'sites',
    );
    expect(methods.map(([group, name]) => `${group}.${name}`)).toEqual(
      expect.arrayContaining(['metal.enroll', 'metal.list', 'metal.abort', 'sites.joinToken']),
    );
    for (const [group, name, method] of methods) {
      const tally: Record<string, number> = {};
      outcomes[`${group}.${name}`] = tally;
      const call = api[group]?.[name];
      if (!call) throw new Error(`${group}.${name} is registered but not on compute.api`);
      await fc.assert(
        fc.asyncProperty(inputsFor(method, h), async (input) => {
          const where = `${group}.${name} ${describeInput(input)}`;
          try {
            await call(token, input);
            tally.ok = (tally.ok ?? 0) + 1;
          } catch (error) {
            if (!isComputeError(error)) throw new Error(`${where}: a raw throw, not a ComputeError`, { cause: error });
            if (!DOCUMENTED.has(error.code)) throw new Error(`${where}: ${error.code} ${error.message}`);
            tally[error.code] = (tally[error.code] ?? 0) + 1;
            if (storableTextProblem(error.message) !== undefined) throw new Error(`${where}: echoed bad text`);
          }
          const response = await compute.handler(
            new Request(`http://localhost/v1/${group}.${name}`, {
              method: 'POST',
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
              body: toJsonText(input),
            }),
          );
          const body = (await response.json()) as { code?: string; message?: string };
          if (response.status >= 500 || (body.code !== undefined && !DOCUMENTED.has(body.code))) {
            throw new Error(`${where} over HTTP: ${response.status} ${body.code} ${body.message}`);
          }
        }),
        { numRuns: RUNS_PER_METHOD, seed: SEED },
      );
    }
    console.info(`outcomes of ${RUNS_PER_METHOD} in-process calls per method:`, JSON.stringify(outcomes));
    // Every machine has its node with a state, a MAC and its event: no refusal left half a machine behind.
    const { rows } = await scratch.db.query<{ n: string }>(
      `SELECT count(*) AS n FROM metal_machines m
       WHERE NOT EXISTS (SELECT 1 FROM nodes WHERE id = m.node_id AND provision_state IS NOT NULL)
          OR NOT EXISTS (SELECT 1 FROM metal_macs WHERE node_id = m.node_id)
          OR NOT EXISTS (SELECT 1 FROM events WHERE subject = 'node/' || m.node_id)`,
    );
    expect(Number(rows[0]?.n)).toBe(0);
  }, 300_000);
});
