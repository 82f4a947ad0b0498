import type { CommandKindDefinition, NewCommand } from '@better-compute/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Batch, batchSigningBytes, generateSigningKeyPair, type Pki, pki, signToBase64Url } from '../../src';
import { scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness } from '../support/harness';

const alice = generateSigningKeyPair('ed25519');
const bob = generateSigningKeyPair('es256');
const carol = generateSigningKeyPair('ed25519');
const approvers = [
  { id: 'alice', publicKey: alice.publicKeyPem },
  { id: 'bob', publicKey: bob.publicJwk },
  { id: 'carol', publicKey: carol.publicKeyPem },
];
const keys = { alice, bob, carol };

let h: Harness;

beforeAll(async () => {
  h = await createHarness(await scratchPglite(), { quorum: { approvers, threshold: 2 } });
});
afterAll(() => h.scratch.drop());

const wipe: CommandKindDefinition = { name: 'deploy.wipe', payload: {} as never, destructive: true };
const reboot: CommandKindDefinition = { name: 'node.reboot', payload: {} as never, destructive: true };
const status: CommandKindDefinition = { name: 'node.status', payload: {} as never };

function cmd(
  kind: CommandKindDefinition,
  extra: Partial<NewCommand & { tenantId: string }> = {},
): NewCommand & { tenantId: string } {
  return {
    tenantId: 'root',
    nodeId: 'node_a',
    kind: kind.name,
    payload: {},
    key: 'wf:w:s',
    notAfter: h.clock.now(),
    ...extra,
  };
}

const policy = (service: Pki, command: NewCommand & { tenantId: string }, kind: CommandKindDefinition) =>
  h.scratch.db.transaction(async (tx) => service.module.commandPolicy?.(tx, command, kind));

const newBatch = (scope: Partial<Parameters<Pki['createBatch']>[1]> = {}) =>
  h.scratch.db.transaction((tx) =>
    h.pki.createBatch(tx, {
      tenantId: 'root',
      nodeIds: ['node_a', 'node_b'],
      commandKinds: ['deploy.wipe'],
      notAfter: new Date(h.clock.now().getTime() + 3600_000),
      ...scope,
    }),
  );

const approve = (batch: Batch, who: keyof typeof keys, signed: Batch = batch) =>
  h.scratch.db.transaction((tx) =>
    h.pki.approveBatch(tx, batch.id, {
      approverId: who,
      signature: signToBase64Url(keys[who].privateKeyPem, batchSigningBytes(signed)),
    }),
  );

describe('the destructive-batch quorum', () => {
  it('allows everything when no approvers are configured', async () => {
    const open = pki({ key: h.key, clock: h.clock });
    await expect(policy(open, cmd(wipe), wipe)).resolves.toBeUndefined();
  });

  it('lets non-destructive commands through without a batch', async () => {
    await expect(policy(h.pki, cmd(status), status)).resolves.toBeUndefined();
  });

  it('says it applies to destructive kinds only, and to none without approvers', () => {
    const appliesTo = h.pki.module.commandPolicy?.appliesTo;
    expect([appliesTo?.(wipe), appliesTo?.(status)]).toEqual([true, false]);
    const open = pki({ key: h.key, clock: h.clock });
    expect(open.module.commandPolicy?.appliesTo?.(wipe)).toBe(false);
  });

  it('refuses a destructive command with no batch as batch-required', async () => {
    const error = await computeErrorOf(policy(h.pki, cmd(wipe), wipe), 'INVALID_STATE');
    expect(error.details.reason).toBe('batch-required');
  });

  it('allows a destructive command in scope of a batch with threshold signatures', async () => {
    const batch = await newBatch();
    expect(batch.id).toMatch(/^bat_/);
    expect(await approve(batch, 'alice')).toEqual({ approvals: 1, approved: false });
    expect(await approve(batch, 'bob')).toEqual({ approvals: 2, approved: true });
    await expect(policy(h.pki, cmd(wipe, { batchId: batch.id }), wipe)).resolves.toBeUndefined();
  });

  it('refuses a batch one signature short as batch-unapproved', async () => {
    const batch = await newBatch();
    await approve(batch, 'carol');
    const error = await computeErrorOf(policy(h.pki, cmd(wipe, { batchId: batch.id }), wipe), 'INVALID_STATE');
    expect(error.details).toMatchObject({ reason: 'batch-unapproved', approvals: 1, threshold: 2 });
  });

  it('refuses a replayed approval by the same approver', async () => {
    const batch = await newBatch();
    const signature = signToBase64Url(alice.privateKeyPem, batchSigningBytes(batch));
    await h.scratch.db.transaction((tx) => h.pki.approveBatch(tx, batch.id, { approverId: 'alice', signature }));
    const error = await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.approveBatch(tx, batch.id, { approverId: 'alice', signature })),
      'CONFLICT',
    );
    expect(error.details.reason).toBe('approval-duplicate');
    await computeErrorOf(policy(h.pki, cmd(wipe, { batchId: batch.id }), wipe), 'INVALID_STATE');
  });

  it('refuses a signature made for another batch', async () => {
    const first = await newBatch();
    const second = await newBatch();
    const error = await computeErrorOf(approve(second, 'alice', first), 'PERMISSION_DENIED');
    expect(error.details.reason).toBe('signature-invalid');
  });

  it('refuses an approver that is not configured, or signing with the wrong key', async () => {
    const batch = await newBatch();
    const signature = signToBase64Url(generateSigningKeyPair().privateKeyPem, batchSigningBytes(batch));
    const unknown = await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.approveBatch(tx, batch.id, { approverId: 'mallory', signature })),
      'PERMISSION_DENIED',
    );
    expect(unknown.details.reason).toBe('approver-unknown');
    const forged = await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.approveBatch(tx, batch.id, { approverId: 'alice', signature })),
      'PERMISSION_DENIED',
    );
    expect(forged.details.reason).toBe('signature-invalid');
  });

  it('refuses a node or a kind outside the batch scope as INVALID_INPUT', async () => {
    const batch = await newBatch();
    await approve(batch, 'alice');
    await approve(batch, 'bob');
    const node = await computeErrorOf(
      policy(h.pki, cmd(wipe, { batchId: batch.id, nodeId: 'node_c' }), wipe),
      'INVALID_INPUT',
    );
    expect(node.details).toMatchObject({ reason: 'batch-node-out-of-scope', path: ['nodeId'] });
    const kind = await computeErrorOf(policy(h.pki, cmd(reboot, { batchId: batch.id }), reboot), 'INVALID_INPUT');
    expect(kind.details).toMatchObject({ reason: 'batch-kind-out-of-scope', path: ['kind'] });
    const tenant = await computeErrorOf(
      policy(h.pki, cmd(wipe, { batchId: batch.id, tenantId: 'acme' }), wipe),
      'INVALID_INPUT',
    );
    expect(tenant.details.reason).toBe('batch-tenant-out-of-scope');
  });

  it('refuses a command under an expired batch as INVALID_INPUT', async () => {
    const batch = await newBatch({ notAfter: new Date(h.clock.now().getTime() + 60_000) });
    await approve(batch, 'alice');
    await approve(batch, 'bob');
    h.clock.advance(60_000);
    const error = await computeErrorOf(policy(h.pki, cmd(wipe, { batchId: batch.id }), wipe), 'INVALID_INPUT');
    expect(error.details.reason).toBe('batch-expired');
    const late = await computeErrorOf(approve(batch, 'carol'), 'INVALID_STATE');
    expect(late.details.reason).toBe('batch-expired');
  });

  it('refuses an unknown batch id as INVALID_INPUT', async () => {
    const error = await computeErrorOf(policy(h.pki, cmd(wipe, { batchId: 'bat_nope' }), wipe), 'INVALID_INPUT');
    expect(error.details.reason).toBe('batch-unknown');
  });

  it('stops counting an approver removed from the configuration', async () => {
    const batch = await newBatch();
    await approve(batch, 'alice');
    await approve(batch, 'bob');
    const fewer = pki({ key: h.key, clock: h.clock, quorum: { approvers: approvers.slice(1), threshold: 2 } });
    const error = await computeErrorOf(policy(fewer, cmd(wipe, { batchId: batch.id }), wipe), 'INVALID_STATE');
    expect(error.details.reason).toBe('batch-unapproved');
  });

  it('signs bytes that include the batch id and are independent of list order', async () => {
    const batch = await newBatch();
    const reordered = { ...batch, nodeIds: [...batch.nodeIds].reverse() };
    expect(batchSigningBytes(reordered)).toEqual(batchSigningBytes(batch));
    expect(new TextDecoder().decode(batchSigningBytes(batch))).toContain(`"id":"${batch.id}"`);
    expect(batchSigningBytes({ ...batch, id: 'bat_other' })).not.toEqual(batchSigningBytes(batch));
  });

  it.each([
    [{ nodeIds: [] }, ['nodeIds']],
    [{ commandKinds: [3] }, ['commandKinds', 0]],
    [{ notAfter: new Date(0) }, ['notAfter']],
    [{ tenantId: '' }, ['tenantId']],
  ])('refuses a bad scope %j with INVALID_INPUT at its path', async (scope, path) => {
    const error = await computeErrorOf(newBatch(scope as never), 'INVALID_INPUT');
    expect(error.details.path).toEqual(path);
  });

  it.each([
    [{ approvers: [{ id: 'a', publicKey: 'nope' }], threshold: 1 }, ['quorum', 'approvers', 0, 'publicKey']],
    [{ approvers: [{ id: 'a', publicKey: alice.publicKeyPem }], threshold: 2 }, ['quorum', 'threshold']],
    [
      {
        approvers: [
          { id: 'a', publicKey: alice.publicKeyPem },
          { id: 'a', publicKey: bob.publicKeyPem },
        ],
        threshold: 1,
      },
      ['quorum', 'approvers', 1, 'id'],
    ],
  ])('refuses a bad quorum configuration with INVALID_CONFIG at its path', async (quorum, path) => {
    const error = await computeErrorOf(() => pki({ key: h.key, quorum }), 'INVALID_CONFIG');
    expect(error.details.path).toEqual(path);
  });

  it('refuses a malformed approval signature with INVALID_INPUT', async () => {
    const batch = await newBatch();
    const error = await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.approveBatch(tx, batch.id, { approverId: 'alice', signature: '!!' })),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['signature']);
  });

  it('rejects a batch for good: no approval after it, and the policy refuses every command under it', async () => {
    const batch = await newBatch();
    await approve(batch, 'alice');
    await approve(batch, 'bob');
    await policy(h.pki, cmd(wipe, { batchId: batch.id }), wipe);
    const rejected = await h.scratch.db.transaction((tx) =>
      h.pki.rejectBatch(tx, batch.id, { by: 'cred_ops', reason: 'change freeze' }),
    );
    expect(rejected.rejection).toEqual({ by: 'cred_ops', reason: 'change freeze', at: h.clock.now() });
    const refused = await computeErrorOf(policy(h.pki, cmd(wipe, { batchId: batch.id }), wipe), 'INVALID_STATE');
    expect(refused.details.reason).toBe('batch-rejected');
    const late = await computeErrorOf(approve(batch, 'carol'), 'INVALID_STATE');
    expect(late.details.reason).toBe('batch-rejected');
    const again = await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.rejectBatch(tx, batch.id, { by: 'cred_ops', reason: 'twice' })),
      'INVALID_STATE',
    );
    expect(again.details.reason).toBe('batch-rejected');
  });

  it('shows a batch through the quorum port: state, valid approvals, threshold and the payload to sign', async () => {
    const port = h.pki.quorum();
    expect(port.enabled()).toBe(true);
    const created = await h.scratch.db.transaction((tx) =>
      port.createBatch(tx, {
        tenantId: 'root',
        nodeIds: ['node_c'],
        commandKinds: ['deploy.wipe'],
        notAfter: new Date(h.clock.now().getTime() + 60_000),
      }),
    );
    expect(created).toMatchObject({ state: 'pending', approvals: 0, threshold: 2, approvedBy: [], rejection: null });
    expect(new TextEncoder().encode(created.signingPayload)).toEqual(batchSigningBytes(created));
    const signature = signToBase64Url(carol.privateKeyPem, new TextEncoder().encode(created.signingPayload));
    const one = await h.scratch.db.transaction((tx) =>
      port.approve(tx, created.id, { approverId: 'carol', signature }),
    );
    expect(one).toMatchObject({ state: 'pending', approvals: 1, approvedBy: ['carol'] });
    const listed = await port.listBatches(h.scratch.db, { tenantId: 'root', nodeId: 'node_c', limit: 10 });
    expect(listed.map((b) => b.id)).toEqual([created.id]);
    h.clock.advance(60_000);
    expect((await port.getBatch(h.scratch.db, created.id))?.state).toBe('expired');
    expect(await port.getBatch(h.scratch.db, 'bat_missing')).toBeUndefined();
  });
});
