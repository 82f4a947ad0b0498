import { createCommandKindRegistry } from '../commands/kind-registry';
import type { Command, CommandKindDefinition, CommandKindRegistry, CommandQueue, NewCommand } from '../commands/types';
import type { Json } from '../json/types';
import { field, manifest } from '../manifest';
import type { SqlExecutor } from '../sql/executor';
import type { ConformanceRunner } from './runner';

/**
 * One fresh {@link CommandQueue} under test, with what the behaviour suite needs around it: the executor to hand it,
 * a clock the suite moves, a node of tenant `acme`, the agent's side (settle a command), and what was stored and
 * woken. Made anew before each test.
 *
 * @example
 * ```ts
 * const subject: CommandQueueSubject = { queue, sql, transaction: (fn) => fn(sql), clock, nodeId: 'node_a',
 *   succeed, fail, keys: async () => queue.list().map((c) => c.key), wakes: async () => [], urgentWakes: async () => 0 };
 * ```
 */
export interface CommandQueueSubject {
  queue: CommandQueue;
  /** The executor reads are given (`get`, `findByKey`). */
  sql: SqlExecutor;
  /** Runs `fn` as the queue's writes run: in a transaction for the kernel's queue, directly for a fake. */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** The queue's clock; the suite moves it forward. */
  clock: { now(): Date; advance(ms: number): void };
  /** A node of the tenant `acme`: every command of the suite is for it. */
  nodeId: string;
  /**
   * The agent succeeds the command: walks it along the agent's path (pending → dispatched → acked → running) from
   * where it is when open, then completes it, as the agent does for a command already settled too.
   */
  succeed(id: string, input?: { result?: Uint8Array; attested?: Json }): Promise<Command>;
  /** The agent fails the command with its reason, walking it to `running` first when open. */
  fail(id: string, reason: string): Promise<Command>;
  /** The key of every command stored, in any order. */
  keys(): Promise<string[]>;
  /** Every wake the queue enqueued, as `kind/key`, in order, one per enqueue (not deduplicated). */
  wakes(): Promise<string[]>;
  /** How many of those wakes asked to be urgent. */
  urgentWakes(): Promise<number>;
}

/**
 * Makes the {@link CommandQueueSubject} for one test from the command kinds the suite registers (their queue must
 * know them: an unknown kind is INVALID_CONFIG, and payloads are checked by the kind's schema).
 *
 * @example
 * ```ts
 * const harness: CommandQueueHarness = async (kinds) => inMemorySubject(kinds);
 * ```
 */
export type CommandQueueHarness = (kinds: CommandKindRegistry) => Promise<CommandQueueSubject>;

const reboot: CommandKindDefinition = { name: 'node.reboot', payload: manifest({}) };
const kexec: CommandKindDefinition = {
  name: 'boot.kexec',
  payload: manifest({ kernel: field.string(), args: field.array(field.string()).default([]) }),
  destructive: true,
  selfTerminating: true,
};

// Plain Standard Schemas validating asynchronously, as any library's may: one passes anything through, one refuses.
const passThrough: CommandKindDefinition = {
  name: 'test.raw',
  payload: { '~standard': { version: 1, vendor: 'test', validate: async (value: unknown) => ({ value }) } },
};
const refusesPort: CommandKindDefinition = {
  name: 'test.port',
  payload: {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: async () => ({ issues: [{ message: 'port must be a number', path: [{ key: 'port' }] }] }),
    },
  },
};

/**
 * The command kinds the behaviour suite registers, for a suite of a queue's own that needs the same ones.
 *
 * @example
 * ```ts
 * const kinds = createCommandKindRegistry([CONFORMANCE_COMMAND_KINDS.reboot]);
 * ```
 */
export const CONFORMANCE_COMMAND_KINDS = Object.freeze({ reboot, kexec, passThrough, refusesPort });

/**
 * The command queue's behaviour through the {@link CommandQueue} port alone (enqueue, get, findByKey, cancel, lazy
 * expiry, wakes, settling through the agent's side), for any implementation: the kernel's queue runs it on each
 * backend, the testkit's in-memory queue runs it too, so the two cannot drift. What needs SQL or a transaction
 * (node rows, policies, `stage`, rollback, the agent functions themselves) stays in the kernel's own suite.
 *
 * @example
 * ```ts
 * import { beforeEach, describe, expect, it } from 'vitest';
 * defineCommandQueueBehaviour({ describe, it, beforeEach, expect }, async (kinds) => makeSubject(kinds));
 * ```
 */
export function defineCommandQueueBehaviour(t: ConformanceRunner, harness: CommandQueueHarness): void {
  const { describe, it, beforeEach, expect } = t;
  const kinds = createCommandKindRegistry([
    { moduleId: 'core', definition: reboot },
    { moduleId: 'metal', definition: kexec },
    { moduleId: 'test', definition: passThrough },
    { moduleId: 'test', definition: refusesPort },
  ]);
  let s: CommandQueueSubject;
  const hour = () => new Date(s.clock.now().getTime() + 3_600_000);
  const enqueueReboot = (key = 'k1', wake = { kind: 'workflow', key: 'wf_1' }) =>
    s.transaction((tx) =>
      s.queue.enqueue(tx, { nodeId: s.nodeId, kind: 'node.reboot', payload: {}, key, notAfter: hour(), wake }),
    );

  describe('command queue behaviour', () => {
    beforeEach(async () => {
      s = await harness(kinds);
    });

    describe('enqueue', () => {
      it('stores a pending command with the tenant of its node and the validated payload', async () => {
        const { queue, nodeId } = s;
        const command = await s.transaction((tx) =>
          queue.enqueue(tx, {
            nodeId,
            kind: 'boot.kexec',
            payload: { kernel: '/vmlinuz' },
            key: 'k',
            notAfter: hour(),
          }),
        );
        expect(command.id).toMatch(/^cmd_/);
        expect(command).toMatchObject({
          tenantId: 'acme',
          nodeId,
          state: 'pending',
          payload: { kernel: '/vmlinuz', args: [] },
        });
        expect(await queue.get(s.sql, command.id)).toEqual(command);
        expect(await queue.findByKey(s.sql, nodeId, 'k')).toEqual(command);
      });

      it('is find-before-create by (node, key): a second enqueue returns the first command unchanged', async () => {
        const first = await enqueueReboot('same');
        s.clock.advance(1000);
        const second = await s.transaction((tx) =>
          s.queue.enqueue(tx, {
            nodeId: s.nodeId,
            kind: 'boot.kexec',
            payload: { kernel: 'x' },
            key: 'same',
            notAfter: hour(),
          }),
        );
        expect(second).toEqual(first);
        expect(await s.keys()).toHaveLength(1);
      });

      it('returns a settled command unchanged to a second enqueue with its key', async () => {
        const first = await enqueueReboot('done');
        const succeeded = await s.succeed(first.id);
        const again = await enqueueReboot('done', { kind: 'workflow', key: 'wf_other' });
        expect(again).toEqual(succeeded);
        expect(again.wake).toEqual({ kind: 'workflow', key: 'wf_1' });
      });

      it('refuses an unknown kind with INVALID_CONFIG', async () => {
        await expect(
          s.transaction((tx) =>
            s.queue.enqueue(tx, { nodeId: s.nodeId, kind: 'node.explode', payload: {}, key: 'k', notAfter: hour() }),
          ),
        ).rejects.toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['kind'] } });
      });

      it('refuses a payload that fails the kind schema, with a path under payload', async () => {
        await expect(
          s.transaction((tx) =>
            s.queue.enqueue(tx, {
              nodeId: s.nodeId,
              kind: 'boot.kexec',
              payload: { kernel: 7 },
              key: 'k',
              notAfter: hour(),
            }),
          ),
        ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['payload', 'kernel'] } });
      });

      it('refuses what an asynchronous schema refuses, and a payload its schema lets through that is not JSON', async () => {
        const enqueueRaw = (kind: string, payload: unknown) =>
          s.transaction((tx) =>
            s.queue.enqueue(tx, { nodeId: s.nodeId, kind, payload: payload as never, key: kind, notAfter: hour() }),
          );
        await expect(enqueueRaw('test.port', { port: 'x' })).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['payload', 'port'] },
        });
        await expect(enqueueRaw('test.raw', { at: new Date() })).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['payload', 'at'] },
        });
        expect(await enqueueRaw('test.raw', { ok: [1, 'two'] })).toMatchObject({ payload: { ok: [1, 'two'] } });
        expect(await s.keys()).toEqual(['test.raw']);
      });

      it('refuses ids and keys PostgreSQL cannot store (a NUL, a lone surrogate), with the path', async () => {
        const { nodeId } = s;
        const base = { nodeId, kind: 'node.reboot', payload: {}, key: 'k', notAfter: hour() };
        for (const [change, path] of [
          [{ key: 'wf:\u0000' }, ['key']],
          [{ nodeId: `${nodeId}\u0000` }, ['nodeId']],
          [{ workflowId: 'wf_\ud800' }, ['workflowId']],
          [{ wake: { kind: 'workflow', key: '\u0000' } }, ['wake', 'key']],
        ] as const) {
          await expect(s.transaction((tx) => s.queue.enqueue(tx, { ...base, ...change }))).rejects.toMatchObject({
            code: 'INVALID_INPUT',
            details: { path },
          });
        }
        await expect(s.queue.findByKey(s.sql, nodeId, 'k\u0000')).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['key'] },
        });
      });

      it('refuses an empty or overlong key and a notAfter that is not in the future', async () => {
        const base = { nodeId: s.nodeId, kind: 'node.reboot', payload: {}, key: 'k', notAfter: hour() };
        for (const [change, path] of [
          [{ key: '' }, ['key']],
          [{ key: 'x'.repeat(513) }, ['key']],
          [{ notAfter: s.clock.now() }, ['notAfter']],
        ] as const) {
          await expect(s.transaction((tx) => s.queue.enqueue(tx, { ...base, ...change }))).rejects.toMatchObject({
            code: 'INVALID_INPUT',
            details: { path },
          });
        }
        const longest = await s.transaction((tx) => s.queue.enqueue(tx, { ...base, key: 'x'.repeat(512) }));
        expect(longest.key).toHaveLength(512);
      });
    });

    describe('state machine', () => {
      it('fails a running command with its reason; a terminal command never changes', async () => {
        const { id } = await enqueueReboot();
        const failed = await s.fail(id, 'disk gone');
        expect(failed).toMatchObject({ state: 'failed', reason: 'disk gone' });
        await expect(s.succeed(id)).rejects.toMatchObject({
          code: 'INVALID_STATE',
          details: { state: 'failed' },
        });
        await expect(s.transaction((tx) => s.queue.cancel(tx, id, 'late'))).rejects.toMatchObject({
          details: { state: 'failed' },
        });
      });

      it('treats a repeated completion as idempotent: same command back, one wake', async () => {
        const { id } = await enqueueReboot();
        const first = await s.succeed(id, { result: new Uint8Array([1]) });
        s.clock.advance(5000);
        const again = await s.succeed(id, { result: new Uint8Array([2]) });
        expect(again).toEqual(first);
        expect(await s.wakes()).toEqual(['workflow/wf_1']);
        // The waiter has a result in hand: the wake is claimed ahead of routine work.
        expect(await s.urgentWakes()).toBe(1);
      });

      it('round-trips result bytes and the attested claim', async () => {
        const { id } = await enqueueReboot();
        const result = new Uint8Array([0, 255, 10, 13, 0x80]);
        const attested = { signature: 'c2ln', wiped: ['nvme0n1'] };
        await s.succeed(id, { result, attested });
        const stored = await s.queue.get(s.sql, id);
        expect(stored?.result).toEqual(result);
        expect(stored?.attested).toEqual(attested);
      });
    });

    describe('sequences', () => {
      const enqueueAfter = (key: string, afterKey: string, extra: Partial<NewCommand> = {}) =>
        s.transaction((tx) =>
          s.queue.enqueue(tx, {
            nodeId: s.nodeId,
            kind: 'node.reboot',
            payload: {},
            key,
            notAfter: hour(),
            wake: { kind: 'workflow', key: 'wf_1' },
            afterKey,
            ...extra,
          }),
        );

      it('keeps a command from its agent until the one it follows succeeded, and wakes only at the end', async () => {
        const first = await enqueueReboot('boot-device');
        const second = await enqueueAfter('power-cycle', 'boot-device');
        expect(second).toMatchObject({ state: 'pending', afterKey: 'boot-device' });
        await expect(s.succeed(second.id)).rejects.toMatchObject({ code: 'INVALID_STATE' });
        await s.succeed(first.id);
        // The command that follows will wake the waiter: the first one's success does not.
        expect(await s.wakes()).toEqual([]);
        expect(await s.succeed(second.id)).toMatchObject({ state: 'succeeded' });
        expect(await s.wakes()).toEqual(['workflow/wf_1']);
      });

      it('cancels the rest of a sequence when a command in it fails, and wakes the waiter once', async () => {
        const first = await enqueueReboot('boot-device');
        await enqueueAfter('boot-entry', 'boot-device');
        await enqueueAfter('power-cycle', 'boot-entry');
        await s.fail(first.id, 'BMC unreachable');
        for (const key of ['boot-entry', 'power-cycle']) {
          expect(await s.queue.findByKey(s.sql, s.nodeId, key)).toMatchObject({
            state: 'cancelled',
            reason: 'after boot-device failed',
          });
        }
        expect(await s.wakes()).toEqual(['workflow/wf_1']);
      });

      it('cancels the rest of a sequence with the reason its cancelled command was given', async () => {
        const first = await enqueueReboot('boot-device');
        await enqueueAfter('power-cycle', 'boot-device');
        await s.transaction((tx) => s.queue.cancel(tx, first.id, 'workflow aborted'));
        expect(await s.queue.findByKey(s.sql, s.nodeId, 'power-cycle')).toMatchObject({
          state: 'cancelled',
          reason: 'workflow aborted',
        });
      });

      it('wakes on a failure only when asked to', async () => {
        const quiet = await enqueueAfter('power-cycle', 'none-yet', { afterKey: undefined, wakeOn: 'failure' });
        expect(quiet.wakeOn).toBe('failure');
        await s.succeed(quiet.id);
        expect(await s.wakes()).toEqual([]);
        const loud = await enqueueAfter('power-off', 'none-yet', { afterKey: undefined, wakeOn: 'failure' });
        await s.fail(loud.id, 'BMC unreachable');
        expect(await s.wakes()).toEqual(['workflow/wf_1']);
      });

      it('refuses a command that follows itself and an unknown wakeOn, with the path', async () => {
        const base = { nodeId: s.nodeId, kind: 'node.reboot', payload: {}, key: 'k', notAfter: hour() };
        for (const [change, path] of [
          [{ afterKey: 'k' }, ['afterKey']],
          [{ afterKey: '' }, ['afterKey']],
          [{ wakeOn: 'success' }, ['wakeOn']],
        ] as const) {
          await expect(
            s.transaction((tx) => s.queue.enqueue(tx, { ...base, ...(change as Partial<NewCommand>) })),
          ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path } });
        }
      });
    });

    describe('expiry', () => {
      it('expires an open command past notAfter when it is read, and wakes its waiter once', async () => {
        const { id } = await enqueueReboot();
        s.clock.advance(3_600_000);
        expect((await s.queue.get(s.sql, id))?.state).toBe('pending');
        s.clock.advance(1);
        expect(await s.queue.get(s.sql, id)).toMatchObject({ state: 'expired', reason: 'notAfter passed' });
        expect(await s.queue.findByKey(s.sql, s.nodeId, 'k1')).toMatchObject({ state: 'expired' });
        expect(await s.wakes()).toEqual(['workflow/wf_1']);
      });
    });
  });
}
