import { randomBytes } from 'node:crypto';
import { betterCompute, type Compute, ComputeError, type ComputeModule, manifest } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import { batchSigningBytes, generateSigningKeyPair, pki, signToBase64Url } from 'better-compute/pki';
import { defineStep, getWorkflow, provisionModule, storeProfile } from 'better-compute/provision';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The PKI wired into betterCompute as steps-and-profiles.md describes: ctx.pki, ctx.secrets, and the quorum policy on
// every command the queue takes.
const approver = generateSigningKeyPair('ed25519');
let compute: Compute;
let security: ReturnType<typeof pki>;
let seen: { tokenId?: string; ref?: string } = {};

const wipe = { name: 'acme.wipe', payload: manifest({}), destructive: true };
const wipeStep = defineStep({
  id: 'acme.wipe',
  runsOn: 'node',
  command: 'acme.wipe',
  timeout: '10m',
  retrySafe: false,
  input: manifest({}),
});

beforeAll(async () => {
  const database = await createPgliteDatabase();
  security = pki({
    key: randomBytes(32).toString('hex'),
    quorum: { approvers: [{ id: 'alice', publicKey: approver.publicKeyPem }], threshold: 1 },
  });
  const probe: ComputeModule = {
    id: 'probe',
    commandKinds: [wipe],
    init: async (ctx) => {
      if (!ctx.pki || !ctx.secrets) throw new ComputeError('INVALID_CONFIG', 'ports missing');
      const pki = ctx.pki;
      const { id } = await ctx.sql.transaction((tx) =>
        pki.issueJoinToken(tx, { tenantId: 'root', role: 'provisioned', ttlSeconds: 7200, maxUses: 1 }),
      );
      seen = { tokenId: id, ref: await ctx.secrets.put('root', 'rendered user data') };
    },
  };
  compute = await betterCompute({
    database,
    modules: [security.module, probe, provisionModule({ steps: [wipeStep] })],
    pki: security.port(),
    secrets: security.secrets(database),
  });
  await database.query(
    "INSERT INTO nodes (id, tenant_id, kind, created_at, updated_at) VALUES ('node_a', 'root', 'machine', $1, $1)",
    [new Date()],
  );
});
afterAll(async () => {
  const db = compute?.database;
  await compute?.close();
  await db?.close();
});

describe('the pki wired into betterCompute', () => {
  it('gives a module ctx.pki to mint join tokens and ctx.secrets to store values by reference', async () => {
    expect(seen.tokenId).toMatch(/^tok_/);
    expect(seen.ref).toMatch(/^sec_/);
    await expect(compute.context.secrets?.resolve(seen.ref as string)).resolves.toBe('rendered user data');
  });

  it('refuses a destructive command without a batch, and takes it under an approved batch', async () => {
    const notAfter = new Date(Date.now() + 60_000);
    const { commands } = compute.context;
    const refused = await compute.database
      .transaction((tx) =>
        commands.enqueue(tx, { nodeId: 'node_a', kind: 'acme.wipe', payload: {}, key: 'k1', notAfter }),
      )
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'INVALID_STATE', details: { reason: 'batch-required' } });

    const batch = await compute.database.transaction((tx) =>
      security.createBatch(tx, { tenantId: 'root', nodeIds: ['node_a'], commandKinds: ['acme.wipe'], notAfter }),
    );
    await compute.database.transaction((tx) =>
      security.approveBatch(tx, batch.id, {
        approverId: 'alice',
        signature: signToBase64Url(approver.privateKeyPem, batchSigningBytes(batch)),
      }),
    );
    const command = await compute.database.transaction((tx) =>
      commands.enqueue(tx, {
        nodeId: 'node_a',
        kind: 'acme.wipe',
        payload: {},
        key: 'k2',
        notAfter,
        batchId: batch.id,
      }),
    );
    expect(command).toMatchObject({ state: 'pending', batchId: batch.id });
  });

  it('puts the commands the workflow engine sends through the quorum too', async () => {
    const workflowId = await compute.database.transaction(async (tx) => {
      const profile = { id: 'acme-wipe', version: 1, target: 'metal', steps: [{ use: 'acme.wipe' }] } as const;
      await storeProfile(tx, { tenantId: 'root', profile }, new Date());
      const started = await compute.context.workflows?.start(tx, {
        tenantId: 'root',
        profileId: 'acme-wipe',
        profileVersion: 1,
        nodeId: 'node_a',
      });
      return started?.id as string;
    });
    await compute.runDueWork();
    const workflow = await getWorkflow(compute.database, { workflowId });
    expect(workflow.steps[0]).toMatchObject({
      state: 'failed',
      error: { code: 'INVALID_STATE', reason: 'batch-required' },
    });
    const { rows } = await compute.database.query('SELECT 1 FROM commands WHERE workflow_id = $1', [workflowId]);
    expect(rows).toEqual([]);
  });
});
