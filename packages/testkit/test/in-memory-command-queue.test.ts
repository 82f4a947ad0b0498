import { type Command, ComputeError, field, manifest, type NewCommand, type SqlExecutor } from '@better-compute/core';
import { addMs, createCommandKindRegistry } from '@better-compute/core/kernel';
import { describe, expect, it } from 'vitest';
import { createFakeClock, createInMemoryCommandQueue, createInMemoryWorkQueue, decodeJsonResult } from '../src';
import { rejection } from './support/harness';

const tx = {} as SqlExecutor;

const kinds = createCommandKindRegistry([
  {
    moduleId: 'test',
    definition: { name: 'test.ping', payload: manifest({ count: field.int({ min: 1 }).default(1) }) },
  },
]);

function setup() {
  const clock = createFakeClock();
  const work = createInMemoryWorkQueue(clock);
  const commands = createInMemoryCommandQueue({ clock, work, kinds });
  const newCommand = (overrides: Partial<NewCommand> = {}): NewCommand => ({
    nodeId: 'node_1',
    kind: 'test.ping',
    payload: {},
    key: 'wf:1:ping',
    notAfter: addMs(clock.now(), 60_000),
    wake: { kind: 'workflow', key: 'node_1' },
    ...overrides,
  });
  return { clock, work, commands, newCommand };
}

async function invalidState(promise: Promise<unknown>): Promise<ComputeError> {
  const err = await rejection(promise);
  expect(err).toBeInstanceOf(ComputeError);
  expect((err as ComputeError).code).toBe('INVALID_STATE');
  return err as ComputeError;
}

describe('createInMemoryCommandQueue: enqueue', () => {
  it('stores a pending command with a cmd_ id, the tenant root and the payload’s defaults', async () => {
    const { commands, newCommand, clock } = setup();
    const command = await commands.enqueue(tx, newCommand());
    expect(command).toMatchObject({ state: 'pending', tenantId: 'root', nodeId: 'node_1', payload: { count: 1 } });
    expect(command.id).toMatch(/^cmd_[0-9a-z]{26}$/);
    expect(command.createdAt).toEqual(clock.now());
    expect(commands.list()).toEqual([command]);
  });

  it('is find-before-create by (nodeId, key): a second enqueue returns the first command unchanged', async () => {
    const { commands, newCommand } = setup();
    const first = await commands.enqueue(tx, newCommand({ payload: { count: 1 } }));
    const second = await commands.enqueue(tx, newCommand({ payload: { count: 5 }, wake: { kind: 'other', key: 'x' } }));
    expect(second).toEqual(first);
    expect(commands.list()).toHaveLength(1);
  });

  it('keeps the same key on another node apart', async () => {
    const { commands, newCommand } = setup();
    const one = await commands.enqueue(tx, newCommand());
    const two = await commands.enqueue(tx, newCommand({ nodeId: 'node_2' }));
    expect(two.id).not.toBe(one.id);
  });

  it('refuses an unknown kind as INVALID_CONFIG when it knows the kinds', async () => {
    const { commands, newCommand } = setup();
    const err = await rejection(commands.enqueue(tx, newCommand({ kind: 'test.unknown' })));
    expect((err as ComputeError).code).toBe('INVALID_CONFIG');
    expect((err as ComputeError).details.path).toEqual(['kind']);
  });

  it('validates the payload against the kind’s schema', async () => {
    const { commands, newCommand } = setup();
    const err = await rejection(commands.enqueue(tx, newCommand({ payload: { count: 0 } })));
    expect((err as ComputeError).code).toBe('INVALID_INPUT');
    expect((err as ComputeError).details.path).toEqual(['payload', 'count']);
    expect(commands.list()).toEqual([]);
  });

  it('accepts any kind with a JSON payload when it is not given the kinds', async () => {
    const clock = createFakeClock();
    const commands = createInMemoryCommandQueue({ clock });
    const command = await commands.enqueue(tx, {
      nodeId: 'n',
      kind: 'any.kind',
      payload: { x: [1] },
      key: 'k',
      notAfter: addMs(clock.now(), 1),
    });
    expect(command.payload).toEqual({ x: [1] });
  });

  it('checks the command’s shape as the kernel does, with the path', async () => {
    const { commands, newCommand, clock } = setup();
    const cases: [Partial<NewCommand>, (string | number)[]][] = [
      [{ nodeId: '' }, ['nodeId']],
      [{ key: 'k'.repeat(513) }, ['key']],
      [{ notAfter: clock.now() }, ['notAfter']],
      [{ notAfter: new Date(Number.NaN) }, ['notAfter']],
      [{ wake: { kind: '', key: 'x' } }, ['wake', 'kind']],
      [{ batchId: '' }, ['batchId']],
    ];
    for (const [overrides, path] of cases) {
      const err = await rejection(commands.enqueue(tx, newCommand(overrides)));
      expect((err as ComputeError).code).toBe('INVALID_INPUT');
      expect((err as ComputeError).details.path).toEqual(path);
    }
  });
});

describe('createInMemoryCommandQueue: lazy expiry', () => {
  it('get expires a command past notAfter, queues its wake once, and returns it expired', async () => {
    const { commands, newCommand, work, clock } = setup();
    const command = await commands.enqueue(tx, newCommand());
    clock.advance(60_000);
    expect((await commands.get(tx, command.id))?.state).toBe('pending'); // the deadline itself is still live
    clock.advance(1);
    const expired = await commands.get(tx, command.id);
    expect(expired).toMatchObject({ state: 'expired', reason: 'notAfter passed', finishedAt: clock.now() });
    expect(work.takeDue().map((item) => item.kind)).toEqual(['workflow']);
    expect((await commands.get(tx, command.id))?.state).toBe('expired');
    expect(work.takeDue()).toEqual([]);
  });

  it('findByKey expires too', async () => {
    const { commands, newCommand, clock } = setup();
    await commands.enqueue(tx, newCommand());
    clock.advance(60_001);
    expect((await commands.findByKey(tx, 'node_1', 'wf:1:ping'))?.state).toBe('expired');
  });

  it('enqueue with the key of a command past notAfter returns it expired', async () => {
    const { commands, newCommand, clock } = setup();
    await commands.enqueue(tx, newCommand());
    clock.advance(60_001);
    const again = await commands.enqueue(tx, newCommand({ notAfter: addMs(clock.now(), 60_000) }));
    expect(again.state).toBe('expired');
  });

  it('list shows commands as stored, without expiring them', async () => {
    const { commands, newCommand, clock } = setup();
    await commands.enqueue(tx, newCommand());
    clock.advance(60_001);
    expect(commands.list()[0]?.state).toBe('pending');
  });

  it('expireDue expires every command past notAfter and queues the wakes', async () => {
    const { commands, newCommand, work, clock } = setup();
    await commands.enqueue(tx, newCommand());
    await commands.enqueue(tx, newCommand({ key: 'later', notAfter: addMs(clock.now(), 120_000) }));
    clock.advance(60_001);
    expect((await commands.expireDue()).map((c) => c.key)).toEqual(['wf:1:ping']);
    expect(work.items()).toHaveLength(1);
  });

  it('a settle of a command past notAfter expires it and is refused', async () => {
    const { commands, newCommand, clock } = setup();
    const command = await commands.enqueue(tx, newCommand());
    clock.advance(60_001);
    const err = await invalidState(commands.succeed(command.id));
    expect(err.details).toMatchObject({ state: 'expired', to: 'succeeded' });
    expect(commands.list()[0]?.state).toBe('expired');
  });
});

describe('createInMemoryCommandQueue: settling', () => {
  it('succeed walks the agent’s path, stores the result and queues the wake', async () => {
    const { commands, newCommand, work, clock } = setup();
    const command = await commands.enqueue(tx, newCommand());
    const done = await commands.succeed(command.id, { result: { ok: true }, attested: { sig: 'x' } });
    expect(done).toMatchObject({ state: 'succeeded', attested: { sig: 'x' }, dispatchedAt: clock.now() });
    expect(decodeJsonResult(done.result as Uint8Array)).toEqual({ ok: true });
    expect(work.takeDue()).toEqual([{ kind: 'workflow', key: 'node_1', notBefore: clock.now(), urgent: true }]);
  });

  it('succeed keeps bytes as they are', async () => {
    const { commands, newCommand } = setup();
    const command = await commands.enqueue(tx, newCommand());
    const done = await commands.succeed(command.id, { result: new Uint8Array([1, 2, 3]) });
    expect(done.result).toEqual(new Uint8Array([1, 2, 3]));
  });

  it('fail and reject settle with their reason and wake', async () => {
    const { commands, newCommand, work } = setup();
    const a = await commands.enqueue(tx, newCommand({ key: 'a' }));
    const b = await commands.enqueue(tx, newCommand({ key: 'b', wake: { kind: 'workflow', key: 'node_2' } }));
    expect(await commands.fail(a.id, 'disk busy')).toMatchObject({ state: 'failed', reason: 'disk busy' });
    expect(await commands.reject(b.id, 'unsupported')).toMatchObject({ state: 'rejected', reason: 'unsupported' });
    expect(work.takeDue().map((item) => item.key)).toEqual(['node_1', 'node_2']);
  });

  it('cancel settles an open command and wakes; cancelling again returns it unchanged without a second wake', async () => {
    const { commands, newCommand, work } = setup();
    const command = await commands.enqueue(tx, newCommand());
    const cancelled = await commands.cancel(tx, command.id, 'workflow cancelled');
    expect(cancelled).toMatchObject({ state: 'cancelled', reason: 'workflow cancelled' });
    expect(work.takeDue()).toHaveLength(1);
    expect(await commands.cancel(tx, command.id, 'again')).toEqual(cancelled);
    expect(work.takeDue()).toEqual([]);
  });

  it('succeeding twice returns the stored command unchanged, with no second wake', async () => {
    const { commands, newCommand, work } = setup();
    const command = await commands.enqueue(tx, newCommand());
    const done = await commands.succeed(command.id, { result: { n: 1 } });
    work.clear();
    expect(await commands.succeed(command.id, { result: { n: 2 } })).toEqual(done);
    expect(work.items()).toEqual([]);
  });

  it('refuses a different terminal state: a cancelled command cannot succeed, a succeeded one cannot fail', async () => {
    const { commands, newCommand } = setup();
    const a = await commands.enqueue(tx, newCommand({ key: 'a' }));
    const b = await commands.enqueue(tx, newCommand({ key: 'b' }));
    await commands.cancel(tx, a.id, 'stop');
    await commands.succeed(b.id);
    const err = await invalidState(commands.succeed(a.id));
    expect(err.details).toMatchObject({ reason: 'invalid-transition', state: 'cancelled', to: 'succeeded' });
    await invalidState(commands.fail(b.id, 'late'));
    await invalidState(commands.reject(b.id, 'late'));
    await invalidState(commands.cancel(tx, b.id, 'late'));
  });

  it('leaves a refused command as it was', async () => {
    const { commands, newCommand } = setup();
    const command = await commands.enqueue(tx, newCommand());
    const failed = await commands.fail(command.id, 'boom');
    await invalidState(commands.succeed(command.id));
    expect(commands.list()).toEqual([failed]);
  });

  it('an unknown id is NOT_FOUND', async () => {
    const { commands } = setup();
    const err = await rejection(commands.succeed('cmd_nope'));
    expect((err as ComputeError).code).toBe('NOT_FOUND');
    expect(await commands.get(tx, 'cmd_nope')).toBeUndefined();
  });

  it('refuses an empty reason', async () => {
    const { commands, newCommand } = setup();
    const command = await commands.enqueue(tx, newCommand());
    const err = await rejection(commands.fail(command.id, ''));
    expect((err as ComputeError).details.path).toEqual(['reason']);
    expect(commands.list()[0]?.state).toBe('pending');
  });

  it('hands out copies: changing a returned command changes nothing stored', async () => {
    const { commands, newCommand } = setup();
    const command: Command = await commands.enqueue(tx, newCommand());
    command.state = 'succeeded';
    (command.payload as { count: number }).count = 99;
    expect(commands.list()[0]).toMatchObject({ state: 'pending', payload: { count: 1 } });
  });

  it('without a work queue, settles drop the wake', async () => {
    const clock = createFakeClock();
    const commands = createInMemoryCommandQueue({ clock });
    const command = await commands.enqueue(tx, {
      nodeId: 'n',
      kind: 'x.y',
      payload: null,
      key: 'k',
      notAfter: addMs(clock.now(), 1_000),
      wake: { kind: 'workflow', key: 'n' },
    });
    expect((await commands.succeed(command.id)).state).toBe('succeeded');
  });
});
