import { COMPUTE_ERROR_CODES, isComputeError } from 'better-compute/core';
import { storableTextProblem } from 'better-compute/core/checks';
import { listApiMethods } from 'better-compute/core/kernel';
import { storeProfile } from 'better-compute/provision';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenFor } from './support/api';
import { describeInput, hostility, inputsFor, toJsonText } from './support/api-fuzz';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { createEngineLab, type EngineLab } from './support/engine-lab';

// Every method of the API, fed arbitrary input shaped after its own JSON Schema (and not): NUL and lone surrogates,
// numbers an int4 or a double cannot hold, very long strings, deep nesting, unknown keys. Whatever comes in, a call
// ends in a result or a documented ComputeError, never INTERNAL, never a raw throw, and never a 500 over HTTP.

/** Runs per method; each run makes one in-process call and one HTTP call. */
const RUNS_PER_METHOD = 100;
/** Changes with every run unless pinned, and is printed, so a failure can be replayed with FC_SEED. */
const SEED = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);

const DOCUMENTED = new Set<string>(COMPUTE_ERROR_CODES.filter((code) => code !== 'INTERNAL'));

describe.each(BACKENDS)('every API method on $name, given arbitrary input', ({ create }) => {
  let scratch: ScratchDatabase;
  let lab: EngineLab;
  let token: string;
  let known: Record<string, string[]>;

  beforeAll(async () => {
    scratch = await create();
    lab = await createEngineLab(scratch.db);
    await lab.reset();
    token = await tokenFor(lab.db, lab.clock, 'root', ['compute:*']);
    await tokenFor(lab.db, lab.clock, 'acme', ['compute:*']);
    const workflowId = await lab.db.transaction(async (tx) => {
      const profile = { id: 'lab-one', version: 1, target: 'metal', steps: [{ use: 'lab.noop' }] };
      await storeProfile(tx, { tenantId: 'root', profile }, lab.clock.now());
      const started = await lab.compute.context.workflows!.start(tx, {
        tenantId: 'root',
        profileId: 'lab-one',
        nodeId: lab.nodeId,
      });
      return started.id;
    });
    known = {
      tenantId: ['root', 'acme'],
      nodeId: [lab.nodeId],
      workflowId: [workflowId],
      profileId: ['lab-one'],
      fromStep: ['main.1', 'cleanup.1'],
    };
    console.info(`API property test on ${scratch.url === undefined ? 'PGlite' : 'PostgreSQL'}: seed ${SEED}`);
  });
  afterAll(async () => {
    await lab?.close();
    await scratch?.drop();
  });

  it('lists the provision groups it fuzzes', () => {
    const names = listApiMethods(lab.compute.registry.apiGroups).map(([group, name]) => `${group}.${name}`);
    expect(names).toEqual(expect.arrayContaining(['profiles.create', 'profiles.list', 'workflows.get']));
  });

  it('answers every call with a result or a documented ComputeError, in process and over HTTP', async () => {
    const h = hostility(known);
    const api = lab.compute.api as unknown as Record<
      string,
      Record<string, (t: string, i: unknown) => Promise<unknown>>
    >;
    // What the calls ended in, per method, printed so a run shows how far the inputs got (not just that none failed).
    const outcomes: Record<string, Record<string, number>> = {};
    for (const [group, name, method] of listApiMethods(lab.compute.registry.apiGroups)) {
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
            // A refusal never repeats input text PostgreSQL cannot store (it could as well be a secret).
            if (storableTextProblem(error.message) !== undefined) throw new Error(`${where}: echoed bad text`);
          }
          const response = await lab.compute.handler(
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
    // Some calls must get through everything, or the fuzzing never reached a handler's queries.
    const succeeded = Object.values(outcomes).filter((tally) => (tally.ok ?? 0) > 0).length;
    expect(succeeded).toBeGreaterThan(Object.keys(outcomes).length / 2);
  }, 120_000);
});
