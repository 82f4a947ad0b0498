import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock';
import {
  type CommandKindDefinition,
  type CommandPolicy,
  type CommandStaging,
  createCommandKindRegistry,
  createCommandQueue,
  type KernelCommandQueue,
  type StagedCommand,
} from '../../src/commands';
import { stagedCommandInsertSql, stagedCommandParam } from '../../src/commands/staged-command';
import { CONFORMANCE_COMMAND_KINDS, defineCommandQueueBehaviour } from '../../src/conformance';
import { ComputeError } from '../../src/errors';
import { newId } from '../../src/ids';
import { isSqlError, type SqlExecutor } from '../../src/sql';
import type { WorkQueue } from '../../src/work';
import type { ScratchDatabase } from '../support/databases';
import { manualClock, migrateCore } from '../support/kernel';

export { manualClock };

/** Applies the kernel migrations and creates the table the recording work queue writes to. */
export async function prepareKernel(db: SqlExecutor, clock: Clock): Promise<void> {
  await migrateCore(db, clock);
  await db.query(
    'CREATE TABLE test_wakes (seq serial PRIMARY KEY, kind text NOT NULL, key text NOT NULL, urgent boolean NOT NULL)',
  );
}

/** Empties every table these suites touch and inserts the tenants `acme` and `globex`. */
export async function resetKernel(db: SqlExecutor, clock: Clock): Promise<void> {
  await db.query('TRUNCATE test_wakes, events, agent_sessions, commands, nodes, sites, tenants CASCADE');
  for (const id of ['acme', 'globex']) {
    await db.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2)', [id, clock.now()]);
  }
}

/** Inserts a node row and returns its id. */
export async function insertNode(
  db: SqlExecutor,
  clock: Clock,
  tenantId: string,
  options: { kind?: string; siteId?: string } = {},
): Promise<string> {
  const id = newId('node');
  await db.query(
    'INSERT INTO nodes (id, tenant_id, site_id, kind, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)',
    [id, tenantId, options.siteId ?? null, options.kind ?? 'machine', clock.now()],
  );
  return id;
}

/** A WorkQueue that records wake-ups in a table, so they commit and roll back with the transaction. */
export const recordingWork: WorkQueue = {
  async enqueue(tx, request) {
    await tx.query('INSERT INTO test_wakes (kind, key, urgent) VALUES ($1, $2, $3)', [
      request.kind,
      request.key,
      request.urgent === true,
    ]);
  },
};

async function wakes(db: SqlExecutor): Promise<string[]> {
  const { rows } = await db.query<{ kind: string; key: string }>('SELECT kind, key FROM test_wakes ORDER BY seq');
  return rows.map((r) => `${r.kind}/${r.key}`);
}

// The same kinds as the shared behaviour suite registers.
const { reboot, kexec, passThrough, refusesPort } = CONFORMANCE_COMMAND_KINDS;

/** The command queue contract, run once per backend. */
export function defineCommandQueueConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  let db: SqlExecutor;
  const clock = manualClock();
  const kinds = createCommandKindRegistry([
    { moduleId: 'core', definition: reboot },
    { moduleId: 'metal', definition: kexec },
    { moduleId: 'test', definition: passThrough },
    { moduleId: 'test', definition: refusesPort },
  ]);
  let queue: KernelCommandQueue & CommandStaging;
  let nodeId: string;
  let otherNodeId: string;
  const hour = () => new Date(clock.now().getTime() + 3_600_000);
  const enqueueReboot = (key = 'k1', wake = { kind: 'workflow', key: 'wf_1' }) =>
    db.transaction((tx) =>
      queue.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key, notAfter: hour(), wake }),
    );
  const toRunning = async (id: string) => {
    await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
    await db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: id }));
    return db.transaction((tx) => queue.startCommand(tx, { nodeId, commandId: id }));
  };

  beforeAll(async () => {
    scratch = await create();
    db = scratch.db;
    await prepareKernel(db, clock);
    queue = createCommandQueue({ kinds, clock, work: recordingWork });
  });
  afterAll(async () => {
    await scratch?.drop();
  });
  beforeEach(async () => {
    await resetKernel(db, clock);
    nodeId = await insertNode(db, clock, 'acme');
    otherNodeId = await insertNode(db, clock, 'globex');
  });

  // The behaviour any CommandQueue shares (the testkit's in-memory queue runs it too); the rest of this file needs
  // SQL: node rows, policies, stage, the agent functions, rollback.
  defineCommandQueueBehaviour({ describe, it, beforeEach, expect }, async (behaviourKinds) => {
    const kernel = createCommandQueue({ kinds: behaviourKinds, clock, work: recordingWork });
    const walk = async (id: string) => {
      const current = await kernel.get(db, id);
      const state = current?.state;
      if (state === 'pending') await db.transaction((tx) => kernel.pollCommands(tx, { nodeId }));
      if (state === 'pending' || state === 'dispatched') {
        await db.transaction((tx) => kernel.ackCommand(tx, { nodeId, commandId: id }));
      }
      if (state === 'pending' || state === 'dispatched' || state === 'acked') {
        await db.transaction((tx) => kernel.startCommand(tx, { nodeId, commandId: id }));
      }
    };
    return {
      queue: kernel,
      sql: db,
      transaction: (fn) => db.transaction(fn),
      clock,
      nodeId,
      async succeed(id, input = {}) {
        await walk(id);
        return db.transaction((tx) => kernel.completeCommand(tx, { nodeId, commandId: id, ...input }));
      },
      async fail(id, reason) {
        await walk(id);
        return db.transaction((tx) => kernel.failCommand(tx, { nodeId, commandId: id, reason }));
      },
      keys: async () => (await db.query<{ key: string }>('SELECT key FROM commands')).rows.map((r) => r.key),
      wakes: () => wakes(db),
      urgentWakes: async () => (await db.query('SELECT 1 FROM test_wakes WHERE urgent')).rowCount,
    };
  });

  describe('command kinds', () => {
    it('refuses a kind two modules register, naming both', () => {
      const twice = () =>
        createCommandKindRegistry([
          { moduleId: 'metal', definition: kexec },
          { moduleId: 'talos', definition: kexec },
        ]);
      expect(twice).toThrow(/metal.*talos/);
      expect(twice).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
    });

    it('refuses a name that is not dotted lower-case, with the path of the entry', () => {
      for (const name of ['reboot', 'Node.Reboot', 'node..reboot', '']) {
        let caught: unknown;
        try {
          createCommandKindRegistry([
            { moduleId: 'core', definition: reboot },
            { moduleId: 'x', definition: { ...reboot, name } },
          ]);
        } catch (error) {
          caught = error;
        }
        expect(caught).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['commandKinds', 1, 'name'] } });
      }
    });
  });

  describe('enqueue', () => {
    it('refuses a node that does not exist with NOT_FOUND', async () => {
      await expect(
        db.transaction((tx) =>
          queue.enqueue(tx, { nodeId: 'node_missing', kind: 'node.reboot', payload: {}, key: 'k', notAfter: hour() }),
        ),
      ).rejects.toMatchObject({ code: 'NOT_FOUND', details: { path: ['nodeId'] } });
    });

    it('runs policies with the tenant and the kind, only for a new key, and a refusing policy stores nothing', async () => {
      const seen: string[] = [];
      const policy: CommandPolicy = async (_tx, command, kind) => {
        seen.push(`${command.tenantId}:${kind.name}:${command.key}`);
        if (kind.destructive) throw new ComputeError('PERMISSION_DENIED', 'needs a batch');
      };
      const guarded = createCommandQueue({ kinds, clock, work: recordingWork, policies: [policy] });
      await db.transaction((tx) =>
        guarded.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key: 'a', notAfter: hour() }),
      );
      await db.transaction((tx) =>
        guarded.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key: 'a', notAfter: hour() }),
      );
      await expect(
        db.transaction((tx) =>
          guarded.enqueue(tx, { nodeId, kind: 'boot.kexec', payload: { kernel: 'k' }, key: 'b', notAfter: hour() }),
        ),
      ).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
      expect(seen).toEqual(['acme:node.reboot:a', 'acme:boot.kexec:b']);
      expect(await queue.findByKey(db, nodeId, 'b')).toBeUndefined();
    });

    it('runs a policy only for the kinds its appliesTo names', async () => {
      const seen: string[] = [];
      const policy: CommandPolicy = Object.assign(
        async (_tx: SqlExecutor, command: { key: string }) => void seen.push(command.key),
        { appliesTo: (kind: CommandKindDefinition) => kind.destructive === true },
      );
      const scoped = createCommandQueue({ kinds, clock, work: recordingWork, policies: [policy] });
      await db.transaction((tx) =>
        scoped.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key: 'plain', notAfter: hour() }),
      );
      await db.transaction((tx) =>
        scoped.enqueue(tx, { nodeId, kind: 'boot.kexec', payload: { kernel: 'k' }, key: 'wipe', notAfter: hour() }),
      );
      expect(seen).toEqual(['wipe']);
    });
  });

  describe('stage', () => {
    const send = (command: StagedCommand, condition = 'TRUE') =>
      db.query<{ id: string }>(stagedCommandInsertSql('$1', '$2', condition), [
        stagedCommandParam(command),
        clock.now(),
      ]);

    it('checks like enqueue and, inserted by a statement of the caller, stores what enqueue would', async () => {
      const input = {
        nodeId,
        kind: 'boot.kexec',
        payload: { kernel: '/vmlinuz' },
        key: 'staged',
        notAfter: hour(),
        batchId: 'bat_1',
        workflowId: 'wf_1',
        stepId: 'main.1',
        targetNodeId: otherNodeId,
        wake: { kind: 'workflow', key: 'wf_1' },
      };
      const staged = (await queue.stage(input)) as StagedCommand;
      expect(staged.id).toMatch(/^cmd_/);
      expect(staged.payload).toEqual({ kernel: '/vmlinuz', args: [] });
      expect((await send(staged)).rows).toEqual([{ id: staged.id }]);
      const enqueued = await db.transaction((tx) => queue.enqueue(tx, { ...input, key: 'enqueued' }));
      const stored = await queue.get(db, staged.id);
      expect(stored).toEqual({ ...enqueued, id: staged.id, key: 'staged' });
      expect(stored).toMatchObject({ tenantId: 'acme', state: 'pending', createdAt: clock.now() });
      // enqueue finds it by its key afterwards.
      expect(await db.transaction((tx) => queue.enqueue(tx, input))).toEqual(stored);
    });

    it('refuses what enqueue refuses, with the same codes and paths', async () => {
      const base = { nodeId, kind: 'boot.kexec', payload: { kernel: 'k' }, key: 'k', notAfter: hour() };
      await expect(queue.stage({ ...base, kind: 'node.explode' })).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
        details: { path: ['kind'] },
      });
      await expect(queue.stage({ ...base, payload: { kernel: 7 } })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['payload', 'kernel'] },
      });
      await expect(queue.stage({ ...base, notAfter: clock.now() })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['notAfter'] },
      });
    });

    it('inserts nothing when its condition is false or its node is gone, and fails on a key already taken', async () => {
      const base = { nodeId, kind: 'node.reboot', payload: {}, key: 'k', notAfter: hour() };
      expect((await send((await queue.stage(base)) as StagedCommand, 'FALSE')).rows).toEqual([]);
      const gone = (await queue.stage({ ...base, nodeId: 'node_missing' })) as StagedCommand;
      expect((await send(gone)).rows).toEqual([]);
      expect((await db.query('SELECT 1 FROM commands')).rowCount).toBe(0);
      await enqueueReboot('k');
      const error = await send((await queue.stage(base)) as StagedCommand).catch((e: unknown) => e);
      expect(isSqlError(error, 'unique-violation')).toBe(true);
      expect((await db.query('SELECT 1 FROM commands')).rowCount).toBe(1);
    });

    it('declines (undefined) when a policy applies to the kind: policies run in the transaction, through enqueue', async () => {
      const guarded = createCommandQueue({ kinds, clock, work: recordingWork, policies: [async () => undefined] });
      const base = { nodeId, kind: 'node.reboot', payload: {}, key: 'k', notAfter: hour() };
      await expect(guarded.stage(base)).resolves.toBeUndefined();
      // Checked all the same.
      await expect(guarded.stage({ ...base, kind: 'node.explode' })).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
      });
      // A policy that names the kinds it looks at leaves the others to stage.
      const destructiveOnly: CommandPolicy = Object.assign(async () => undefined, {
        appliesTo: (kind: CommandKindDefinition) => kind.destructive === true,
      });
      const scoped = createCommandQueue({ kinds, clock, work: recordingWork, policies: [destructiveOnly] });
      expect(await scoped.stage(base)).toMatchObject({ kind: 'node.reboot' });
      const kexecInput = { ...base, kind: 'boot.kexec', payload: { kernel: 'k' } };
      await expect(scoped.stage(kexecInput)).resolves.toBeUndefined();
    });
  });

  describe('state machine', () => {
    it('walks pending → dispatched → acked → running → succeeded', async () => {
      const { id } = await enqueueReboot();
      const [polled] = await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      expect(polled).toMatchObject({ id, state: 'dispatched' });
      expect((await db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: id }))).state).toBe('acked');
      expect((await db.transaction((tx) => queue.startCommand(tx, { nodeId, commandId: id }))).state).toBe('running');
      const done = await db.transaction((tx) => queue.completeCommand(tx, { nodeId, commandId: id }));
      expect(done).toMatchObject({ state: 'succeeded' });
      expect(done.finishedAt).toEqual(clock.now());
    });

    it('refuses transitions out of order with INVALID_STATE invalid-transition and the current state', async () => {
      const { id } = await enqueueReboot();
      await expect(db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: id }))).rejects.toMatchObject({
        code: 'INVALID_STATE',
        details: { reason: 'invalid-transition', state: 'pending' },
      });
      await expect(
        db.transaction((tx) => queue.rejectCommand(tx, { nodeId, commandId: id, reason: 'no' })),
      ).rejects.toMatchObject({
        details: { reason: 'invalid-transition', state: 'pending' },
      });
      await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      await expect(db.transaction((tx) => queue.startCommand(tx, { nodeId, commandId: id }))).rejects.toMatchObject({
        details: { state: 'dispatched' },
      });
      await expect(db.transaction((tx) => queue.completeCommand(tx, { nodeId, commandId: id }))).rejects.toMatchObject({
        details: { state: 'dispatched' },
      });
      await db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: id }));
      await expect(
        db.transaction((tx) => queue.failCommand(tx, { nodeId, commandId: id, reason: 'x' })),
      ).rejects.toMatchObject({
        details: { state: 'acked' },
      });
      await db.transaction((tx) => queue.startCommand(tx, { nodeId, commandId: id }));
      await expect(
        db.transaction((tx) => queue.rejectCommand(tx, { nodeId, commandId: id, reason: 'x' })),
      ).rejects.toMatchObject({
        details: { state: 'running' },
      });
      expect((await queue.get(db, id))?.state).toBe('running');
    });

    it('lets the agent reject from dispatched and from acked, recording the reason', async () => {
      const a = await enqueueReboot('a');
      const b = await enqueueReboot('b');
      await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      await db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: b.id }));
      const ra = await db.transaction((tx) => queue.rejectCommand(tx, { nodeId, commandId: a.id, reason: 'busy' }));
      const rb = await db.transaction((tx) =>
        queue.rejectCommand(tx, { nodeId, commandId: b.id, reason: 'unsupported' }),
      );
      expect([ra.state, ra.reason, rb.state, rb.reason]).toEqual(['rejected', 'busy', 'rejected', 'unsupported']);
    });

    it('answers NOT_FOUND when another node acts on the command, and changes nothing', async () => {
      const { id } = await enqueueReboot();
      await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      await expect(
        db.transaction((tx) => queue.ackCommand(tx, { nodeId: otherNodeId, commandId: id })),
      ).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      expect(await db.transaction((tx) => queue.pollCommands(tx, { nodeId: otherNodeId }))).toEqual([]);
      expect((await queue.get(db, id))?.state).toBe('dispatched');
    });
  });

  describe('poll, expiry and cancel', () => {
    it('polls at-least-once: dispatched commands come back until acked', async () => {
      const { id } = await enqueueReboot();
      const once = await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      const twice = await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      expect(once.map((c) => c.id)).toEqual([id]);
      expect(twice.map((c) => [c.id, c.state])).toEqual([[id, 'dispatched']]);
      await db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: id }));
      expect(await db.transaction((tx) => queue.pollCommands(tx, { nodeId }))).toEqual([]);
    });

    it('says whether a poll would find anything: a command to deliver or one to expire, and nothing for another node', async () => {
      const has = (node = nodeId) => queue.hasCommandsToPoll(db, { nodeId: node });
      expect(await has()).toBe(false);
      const { id } = await enqueueReboot();
      expect([await has(), await has(otherNodeId)]).toEqual([true, false]);
      await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      expect(await has()).toBe(true); // dispatched comes back until acked
      await db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: id }));
      expect(await has()).toBe(false); // acked: nothing to deliver, not yet due
      clock.advance(3_600_001);
      expect(await has()).toBe(true); // past notAfter: the poll expires it
      await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      expect(await has()).toBe(false);
    });

    it('polls a command of a sequence only once the one it follows succeeded, and says so beforehand', async () => {
      const first = await enqueueReboot('boot-device');
      const second = await db.transaction((tx) =>
        queue.enqueue(tx, {
          nodeId,
          kind: 'node.reboot',
          payload: {},
          key: 'power-cycle',
          afterKey: 'boot-device',
          notAfter: new Date(clock.now().getTime() + 3_600_000),
        }),
      );
      const poll = () => db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      expect((await poll()).map((c) => c.key)).toEqual(['boot-device']);
      await db.transaction((tx) => queue.ackCommand(tx, { nodeId, commandId: first.id }));
      await db.transaction((tx) => queue.startCommand(tx, { nodeId, commandId: first.id }));
      expect(await queue.hasCommandsToPoll(db, { nodeId })).toBe(false);
      expect(await poll()).toEqual([]);
      await db.transaction((tx) => queue.completeCommand(tx, { nodeId, commandId: first.id }));
      expect(await queue.hasCommandsToPoll(db, { nodeId })).toBe(true);
      expect((await poll()).map((c) => [c.id, c.state])).toEqual([[second.id, 'dispatched']]);
    });

    it('respects the poll limit and refuses one out of range', async () => {
      for (const key of ['a', 'b', 'c']) await enqueueReboot(key);
      const two = await db.transaction((tx) => queue.pollCommands(tx, { nodeId, limit: 2 }));
      expect(two.map((c) => c.key)).toEqual(['a', 'b']);
      await expect(db.transaction((tx) => queue.pollCommands(tx, { nodeId, limit: 0 }))).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['limit'] },
      });
    });

    it('expires a command past notAfter when polled, and wakes its waiter', async () => {
      const { id } = await enqueueReboot();
      clock.advance(3_600_000);
      expect((await db.transaction((tx) => queue.pollCommands(tx, { nodeId }))).map((c) => c.id)).toEqual([id]);
      clock.advance(1);
      expect(await db.transaction((tx) => queue.pollCommands(tx, { nodeId }))).toEqual([]);
      expect(await queue.get(db, id)).toMatchObject({ state: 'expired' });
      expect(await wakes(db)).toEqual(['workflow/wf_1']);
    });

    it('refuses an agent move on a command past notAfter as INVALID_STATE, keeping the expiry', async () => {
      const { id } = await enqueueReboot();
      await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
      clock.advance(3_600_001);
      const err = await queue.ackCommand(db, { nodeId, commandId: id }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'INVALID_STATE', details: { reason: 'invalid-transition', state: 'expired' } });
      const { rows } = await db.query<{ state: string }>('SELECT state FROM commands WHERE id = $1', [id]);
      expect(rows[0]?.state).toBe('expired');
      expect(await wakes(db)).toEqual(['workflow/wf_1']);
    });

    it('expireDueCommands expires open commands of every state past notAfter, and only those', async () => {
      const running = await enqueueReboot('running');
      await toRunning(running.id);
      const pending = await enqueueReboot('pending', { kind: 'workflow', key: 'wf_2' });
      clock.advance(1000);
      const later = await enqueueReboot('later', { kind: 'workflow', key: 'wf_3' });
      const at = new Date(clock.now().getTime() + 3_600_000 - 500);
      const expired = await db.transaction((tx) => queue.expireDueCommands(tx, at));
      expect(expired.map((c) => c.key).sort()).toEqual(['pending', 'running']);
      expect((await queue.get(db, later.id))?.state).toBe('pending');
      expect((await queue.get(db, pending.id))?.state).toBe('expired');
      expect((await wakes(db)).sort()).toEqual(['workflow/wf_1', 'workflow/wf_2']);
    });

    it('cancels an open command with its reason; cancelling again is idempotent', async () => {
      const { id } = await enqueueReboot();
      await toRunning(id);
      const cancelled = await db.transaction((tx) => queue.cancel(tx, id, 'workflow cancelled'));
      expect(cancelled).toMatchObject({ state: 'cancelled', reason: 'workflow cancelled' });
      expect(await db.transaction((tx) => queue.cancel(tx, id, 'again'))).toEqual(cancelled);
      await expect(db.transaction((tx) => queue.cancel(tx, 'cmd_missing', 'x'))).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      expect(await wakes(db)).toEqual(['workflow/wf_1']);
    });

    it('rolls the wake back with the transaction that settled the command', async () => {
      const { id } = await enqueueReboot();
      await expect(
        db.transaction(async (tx) => {
          await queue.cancel(tx, id, 'cancel');
          throw new ComputeError('CONFLICT', 'abort');
        }),
      ).rejects.toMatchObject({ code: 'CONFLICT' });
      expect(await wakes(db)).toEqual([]);
      expect((await queue.get(db, id))?.state).toBe('pending');
    });
  });
}
