import { type Command, type Compute, type ComputeModule, field, manifest } from '@better-compute/core';
import { addMs, currentAgentSession } from '@better-compute/core/kernel';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  crashingDatabase,
  createFakeAgent,
  createFakeClock,
  decodeJsonResult,
  type FakeClock,
  insertNode,
} from '../src';
import { type SharedDatabase, sharedDatabase } from './support/harness';

const module: ComputeModule = {
  id: 'agent-test',
  commandKinds: [
    { name: 'test.ping', payload: manifest({}) },
    { name: 'test.wipe', payload: manifest({ disk: field.string().default('sda') }) },
  ],
};

let shared: SharedDatabase;
beforeAll(async () => {
  shared = await sharedDatabase();
});
afterAll(() => shared.close());

let clock: FakeClock;
let compute: Compute;
let nodeId: string;
beforeEach(async () => {
  await shared.reset();
  clock = createFakeClock();
  compute = await shared.compute(clock, [module]);
  nodeId = await insertNode(compute.database, {}, clock);
});

async function send(kind: string, key: string): Promise<Command> {
  return compute.database.transaction((tx) =>
    compute.commands.enqueue(tx, { nodeId, kind, payload: {}, key, notAfter: addMs(clock.now(), 600_000) }),
  );
}

async function stored(command: Command): Promise<Command> {
  return (await compute.commands.get(compute.database, command.id)) as Command;
}

describe('createFakeAgent: sessions', () => {
  it('connect opens a session with its boot id and role, visible through currentAgentSession', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'ramdisk', bootId: 'boot-1' });
    expect(agent.connected).toBe(false);
    await agent.connect();
    const session = await currentAgentSession(compute.database, nodeId, { now: clock.now() });
    expect(session).toMatchObject({ role: 'ramdisk', bootId: 'boot-1', id: agent.session?.id });
    expect(agent.connected).toBe(true);
  });

  it('makes up a random boot id when given none', async () => {
    const a = createFakeAgent(compute, { nodeId, role: 'node' });
    const b = createFakeAgent(compute, { nodeId, role: 'node' });
    expect(a.bootId).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.bootId).not.toBe(b.bootId);
  });

  it('disconnect closes its session', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    await agent.connect();
    await agent.disconnect();
    expect(agent.connected).toBe(false);
    expect(await currentAgentSession(compute.database, nodeId, { now: clock.now() })).toBeUndefined();
  });

  it('rejoin opens a new session with a fresh boot id and the new role, visible through currentAgentSession', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'ramdisk', bootId: 'boot-1' });
    await agent.connect();
    await agent.rejoin({ role: 'provisioned' });
    expect(agent.bootId).not.toBe('boot-1');
    expect(agent.role).toBe('provisioned');
    const session = await currentAgentSession(compute.database, nodeId, { now: clock.now() });
    expect(session).toMatchObject({ bootId: agent.bootId, role: 'provisioned' });
    const { rows } = await compute.database.query<{ open: number }>(
      'SELECT count(*)::int AS open FROM agent_sessions WHERE node_id = $1 AND closed_at IS NULL',
      [nodeId],
    );
    expect(rows[0]?.open).toBe(1);
  });

  it('rejoin takes the boot id it is given and keeps its role when given none', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node', bootId: 'boot-1' });
    await agent.rejoin({ bootId: 'boot-2' });
    expect(await currentAgentSession(compute.database, nodeId, { now: clock.now() })).toMatchObject({
      bootId: 'boot-2',
      role: 'node',
    });
  });

  it('a poll touches its session, so it stays connected as the clock moves', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    await agent.connect();
    clock.advance(50_000);
    await agent.poll();
    clock.advance(50_000);
    expect(await currentAgentSession(compute.database, nodeId, { now: clock.now() })).toBeDefined();
  });
});

describe('createFakeAgent: answering', () => {
  it('by default succeeds every command with no result', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    await agent.connect();
    const command = await send('test.ping', 'k1');
    expect(await agent.poll()).toBe(1);
    const done = await stored(command);
    expect(done.state).toBe('succeeded');
    expect(done.result).toBeUndefined();
    expect(agent.answered).toEqual([{ commandId: command.id, kind: 'test.ping', key: 'k1', outcome: 'succeed' }]);
  });

  it('succeeds with a JSON result (stored as UTF-8 JSON bytes) and an attested claim', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond({ outcome: 'succeed', result: { disks: 2 }, attested: { sig: 'abc' } });
    await agent.connect();
    const command = await send('test.ping', 'k1');
    await agent.poll();
    const done = await stored(command);
    expect(decodeJsonResult(done.result as Uint8Array)).toEqual({ disks: 2 });
    expect(done.attested).toEqual({ sig: 'abc' });
  });

  it('succeeds with a bytes result as given', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond({ outcome: 'succeed', result: new Uint8Array([0, 255]) });
    await agent.connect();
    const command = await send('test.ping', 'k1');
    await agent.poll();
    expect((await stored(command)).result).toEqual(new Uint8Array([0, 255]));
  });

  it('fails with its reason', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond({ outcome: 'fail', reason: 'disk busy' });
    await agent.connect();
    const command = await send('test.ping', 'k1');
    expect(await agent.poll()).toBe(1);
    expect(await stored(command)).toMatchObject({ state: 'failed', reason: 'disk busy' });
    expect(agent.answered[0]?.outcome).toBe('fail');
  });

  it('rejects with its reason', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond({ outcome: 'reject', reason: 'unsupported' });
    await agent.connect();
    const command = await send('test.ping', 'k1');
    expect(await agent.poll()).toBe(1);
    expect(await stored(command)).toMatchObject({ state: 'rejected', reason: 'unsupported' });
    expect(agent.answered[0]?.outcome).toBe('reject');
  });

  it('silent acks and starts but never finishes; later polls leave it running', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond({ outcome: 'silent' });
    await agent.connect();
    const command = await send('test.ping', 'k1');
    expect(await agent.poll()).toBe(1);
    expect(await agent.poll()).toBe(0);
    expect((await stored(command)).state).toBe('running');
    expect(agent.answered.map((a) => a.outcome)).toEqual(['silent']);
  });

  it('ignore never answers: the command stays dispatched and nothing is recorded', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond({ outcome: 'ignore' });
    await agent.connect();
    const command = await send('test.ping', 'k1');
    expect(await agent.poll()).toBe(0);
    expect(await agent.poll()).toBe(0);
    expect((await stored(command)).state).toBe('dispatched');
    expect(agent.answered).toEqual([]);
  });

  it('a behavior for one kind wins over the one for all kinds', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond({ outcome: 'fail', reason: 'no' });
    agent.respond('test.wipe', { outcome: 'succeed' });
    await agent.connect();
    const ping = await send('test.ping', 'k1');
    const wipe = await send('test.wipe', 'k2');
    expect(await agent.poll()).toBe(2);
    expect((await stored(ping)).state).toBe('failed');
    expect((await stored(wipe)).state).toBe('succeeded');
  });

  it('a function chooses the behavior per command', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    agent.respond((command) =>
      command.key === 'bad' ? { outcome: 'reject', reason: 'bad key' } : { outcome: 'succeed' },
    );
    await agent.connect();
    const good = await send('test.ping', 'good');
    const bad = await send('test.ping', 'bad');
    await agent.poll();
    expect((await stored(good)).state).toBe('succeeded');
    expect((await stored(bad)).state).toBe('rejected');
  });

  it('a disconnected agent answers nothing: its commands stay pending', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    await agent.connect();
    await agent.disconnect();
    const command = await send('test.ping', 'k1');
    expect(await agent.poll()).toBe(0);
    expect((await stored(command)).state).toBe('pending');
    expect(agent.answered).toEqual([]);
  });

  it('an agent never connected answers nothing', async () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    const command = await send('test.ping', 'k1');
    expect(await agent.poll()).toBe(0);
    expect((await stored(command)).state).toBe('pending');
  });

  it('an agent whose session another boot replaced is disconnected at its next poll', async () => {
    const old = createFakeAgent(compute, { nodeId, role: 'ramdisk' });
    const fresh = createFakeAgent(compute, { nodeId, role: 'provisioned' });
    await old.connect();
    await fresh.connect();
    const command = await send('test.ping', 'k1');
    expect(await old.poll()).toBe(0);
    expect(old.connected).toBe(false);
    expect((await stored(command)).state).toBe('pending');
    expect(await fresh.poll()).toBe(1);
  });

  it('answers each move in its own transaction, as separate agent API calls', async () => {
    const counting = crashingDatabase(compute.database, undefined);
    const agent = createFakeAgent({ ...compute, database: counting }, { nodeId, role: 'node' });
    await agent.connect();
    await send('test.ping', 'k1');
    const before = counting.boundaries;
    await agent.poll();
    // touch + poll, ack, start, complete
    expect(counting.boundaries - before).toBe(4);
  });

  it('refuses a behavior with an unknown outcome', () => {
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    expect(() => agent.respond({ outcome: 'explode' } as never)).toThrow(/outcome/);
  });
});
