import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAgentApi } from '../../src/agent-api';
import { type AgentHarness, createAgentHarness, type JoinedAgent } from './agent-harness';

let h: AgentHarness;
let other: JoinedAgent;

// Re-checks are slow here, so a poll answered quickly was woken by the notification.
beforeAll(async () => {
  h = await createAgentHarness({ recheckMs: 10_000 });
  other = await h.join();
});
afterAll(() => h.close());

const until = async (condition: () => boolean, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe('the long poll', () => {
  // A polled command is polled again until it is settled, so each test polls as a node of its own.
  let agent: JoinedAgent;
  beforeEach(async () => {
    agent = await h.join();
  });

  it('answers at once when there are commands', async () => {
    const commandId = await h.enqueue(agent.nodeId);
    const started = Date.now();
    const { body } = await h.call('commands.poll', { waitMs: 20_000 }, agent.certificatePem);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect((body.commands as { id: string }[]).map((c) => c.id)).toEqual([commandId]);
    await h.call('commands.reject', { commandId, reason: 'done with it' }, agent.certificatePem);
  });

  it('answers as soon as a command for the node is enqueued during the wait', async () => {
    const started = Date.now();
    const polling = h.call('commands.poll', { waitMs: 8_000 }, agent.certificatePem);
    await until(() => h.api.waiting() === 1);
    // A command for another node does not wake this poll.
    await h.enqueue(other.nodeId);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.api.waiting()).toBe(1);
    const commandId = await h.enqueue(agent.nodeId);
    const { status, body } = await polling;
    expect(status).toBe(200);
    expect((body.commands as { id: string }[]).map((c) => c.id)).toEqual([commandId]);
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(h.api.waiting()).toBe(0);
  });

  it('wakes on a command staged by the commit service too', async () => {
    const { commit } = await import('@better-compute/core/kernel');
    const polling = h.call('commands.poll', { waitMs: 8_000 }, agent.certificatePem);
    await until(() => h.api.waiting() === 1);
    const started = Date.now();
    const result = await commit(h.compute.context, {
      changes: [{ name: 'touched', sql: ({ bind, guard }) => `SELECT ${bind(1)}::int AS one WHERE ${guard}` }],
      command: {
        nodeId: agent.nodeId,
        kind: 'test.run',
        payload: { note: 'staged' },
        key: 'wf:wf_staged:step#1',
        notAfter: new Date(h.clock.now().getTime() + 60_000),
      },
    });
    expect(result.status).toBe('committed');
    const { body } = await polling;
    expect((body.commands as { payload: unknown }[]).map((c) => c.payload)).toEqual([{ note: 'staged' }]);
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('answers with no commands at the bound when none arrives', async () => {
    const bounded = createAgentApi({ compute: h.compute, pki: h.security, longPollMaxMs: 400 });
    try {
      const started = Date.now();
      const { body } = await h.call('commands.poll', { waitMs: 30_000 }, agent.certificatePem, { api: bounded });
      const elapsed = Date.now() - started;
      expect(body.commands).toEqual([]);
      expect(elapsed).toBeGreaterThanOrEqual(350);
      expect(elapsed).toBeLessThan(3_000);
    } finally {
      await bounded.close();
    }
  });

  it('releases the waiter of a client that disconnects mid-poll', async () => {
    const controller = new AbortController();
    const started = Date.now();
    const polling = h.call('commands.poll', { waitMs: 20_000 }, agent.certificatePem, { signal: controller.signal });
    await until(() => h.api.waiting() === 1);
    controller.abort();
    await polling;
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(h.api.waiting()).toBe(0);
  });

  it('re-checks on its timer, so a missed notification only delays the answer', async () => {
    const quick = createAgentApi({ compute: h.compute, pki: h.security, recheckMs: 200 });
    try {
      const polling = h.call('commands.poll', { waitMs: 8_000 }, agent.certificatePem, { api: quick });
      await until(() => quick.waiting() === 1);
      // Inserted without the NOTIFY: only the re-check finds it.
      await h.compute.database.query(
        `INSERT INTO commands (id, tenant_id, node_id, kind, payload, key, state, not_after, created_at, updated_at)
         VALUES ('cmd_silent', 'root', $1, 'test.run', '{}', 'wf:wf_silent:step#1', 'pending', $2, $3, $3)`,
        [agent.nodeId, new Date(h.clock.now().getTime() + 60_000), h.clock.now()],
      );
      const { body } = await polling;
      expect((body.commands as { id: string }[]).map((c) => c.id)).toEqual(['cmd_silent']);
    } finally {
      await quick.close();
    }
  });

  it('answers held polls when the API closes', async () => {
    const closing = createAgentApi({ compute: h.compute, pki: h.security });
    const polling = h.call('commands.poll', { waitMs: 20_000 }, agent.certificatePem, { api: closing });
    await until(() => closing.waiting() === 1);
    await closing.close();
    expect((await polling).body.commands).toEqual([]);
  });
});
