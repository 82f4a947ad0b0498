import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type AgentRole,
  bootLeaseHolder,
  closeAgentSession,
  connectedSiteAgents,
  currentAgentSession,
  openAgentSession,
  touchAgentSession,
} from '../../src/agents';
import { newId } from '../../src/ids';
import type { SqlExecutor } from '../../src/sql';
import type { ScratchDatabase } from '../support/databases';
import { insertNode, manualClock, prepareKernel, resetKernel } from './command-queue';

/** The agent sessions contract, run once per backend. */
export function defineAgentSessionsConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  let db: SqlExecutor;
  const clock = manualClock();
  let nodeId: string;
  let siteId: string;
  const open = (node: string, role: AgentRole = 'node', bootId = 'boot-1') =>
    db.transaction((tx) => openAgentSession(tx, { nodeId: node, role, bootId, clock }));

  beforeAll(async () => {
    scratch = await create();
    db = scratch.db;
    await prepareKernel(db, clock);
  });
  afterAll(async () => {
    await scratch?.drop();
  });
  beforeEach(async () => {
    await resetKernel(db, clock);
    siteId = newId('site');
    await db.query('INSERT INTO sites (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)', [
      siteId,
      'acme',
      'dc1',
      clock.now(),
    ]);
    nodeId = await insertNode(db, clock, 'acme', { siteId });
  });

  describe('open, touch and close', () => {
    it('opens a session with the clock time and makes it the current one', async () => {
      const session = await open(nodeId, 'ramdisk', 'boot-a');
      expect(session).toMatchObject({ nodeId, role: 'ramdisk', bootId: 'boot-a', connectedAt: clock.now() });
      expect(session.id).toMatch(/^ses_/);
      expect(await currentAgentSession(db, nodeId, { now: clock.now() })).toEqual(session);
    });

    it('closes the previous open session of the node when a new one opens', async () => {
      const first = await open(nodeId, 'ramdisk', 'boot-a');
      clock.advance(1000);
      const second = await open(nodeId, 'provisioned', 'boot-b');
      const { rows } = await db.query<{ id: string; closed_at: Date | null }>(
        'SELECT id, closed_at FROM agent_sessions ORDER BY connected_at',
      );
      expect(rows).toEqual([
        { id: first.id, closed_at: clock.now() },
        { id: second.id, closed_at: null },
      ]);
      expect((await currentAgentSession(db, nodeId, { now: clock.now() }))?.bootId).toBe('boot-b');
    });

    it('refuses an unknown role, an empty boot id and an unknown node', async () => {
      await expect(
        db.transaction((tx) => openAgentSession(tx, { nodeId, role: 'admin' as 'node', bootId: 'b', clock })),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['role'] } });
      await expect(
        db.transaction((tx) => openAgentSession(tx, { nodeId, role: 'node', bootId: '', clock })),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['bootId'] } });
      await expect(open('node_missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    });

    it('refuses a node id or boot id PostgreSQL cannot store, with the path', async () => {
      await expect(
        db.transaction((tx) => openAgentSession(tx, { nodeId: `${nodeId}\u0000`, role: 'node', bootId: 'b', clock })),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['nodeId'] } });
      await expect(
        db.transaction((tx) => openAgentSession(tx, { nodeId, role: 'node', bootId: 'boot\ud800', clock })),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['bootId'] } });
    });

    it('counts a session as connected only while it is touched within staleAfterMs', async () => {
      const session = await open(nodeId);
      clock.advance(59_000);
      expect(await currentAgentSession(db, nodeId, { now: clock.now() })).toBeDefined();
      await db.transaction((tx) => touchAgentSession(tx, { sessionId: session.id, clock }));
      clock.advance(59_000);
      expect((await currentAgentSession(db, nodeId, { now: clock.now() }))?.lastSeenAt).toEqual(
        new Date(clock.now().getTime() - 59_000),
      );
      clock.advance(2000);
      expect(await currentAgentSession(db, nodeId, { now: clock.now() })).toBeUndefined();
      expect(await currentAgentSession(db, nodeId, { now: clock.now(), staleAfterMs: 120_000 })).toBeDefined();
    });

    it('closes a session idempotently, after which touching it is INVALID_STATE', async () => {
      const session = await open(nodeId);
      const closed = await db.transaction((tx) => closeAgentSession(tx, { sessionId: session.id, clock }));
      expect(closed.closedAt).toEqual(clock.now());
      clock.advance(1000);
      expect(await db.transaction((tx) => closeAgentSession(tx, { sessionId: session.id, clock }))).toEqual(closed);
      expect(await currentAgentSession(db, nodeId, { now: clock.now() })).toBeUndefined();
      await expect(
        db.transaction((tx) => touchAgentSession(tx, { sessionId: session.id, clock })),
      ).rejects.toMatchObject({
        code: 'INVALID_STATE',
        details: { reason: 'session-closed' },
      });
      await expect(
        db.transaction((tx) => closeAgentSession(tx, { sessionId: 'ses_missing', clock })),
      ).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
    });
  });

  describe('connectedSiteAgents', () => {
    it('lists the site agents of the site with a fresh open session, and nothing else', async () => {
      const fresh = await insertNode(db, clock, 'acme', { siteId, kind: 'site-agent' });
      const stale = await insertNode(db, clock, 'acme', { siteId, kind: 'site-agent' });
      const closed = await insertNode(db, clock, 'acme', { siteId, kind: 'site-agent' });
      await insertNode(db, clock, 'acme', { siteId, kind: 'site-agent' }); // never connected
      await open(stale, 'site');
      clock.advance(61_000);
      const session = await open(fresh, 'site');
      const closing = await open(closed, 'site');
      await db.transaction((tx) => closeAgentSession(tx, { sessionId: closing.id, clock }));
      await open(nodeId, 'node'); // a machine of the site, not a site agent
      const agents = await connectedSiteAgents(db, siteId, { now: clock.now() });
      expect(agents).toEqual([{ nodeId: fresh, session }]);
      expect(await connectedSiteAgents(db, 'site_other', { now: clock.now() })).toEqual([]);
    });
  });

  describe('boot leases', () => {
    const siteAgent = () => insertNode(db, clock, 'acme', { siteId, kind: 'site-agent' });
    const holder = async () => (await bootLeaseHolder(db, siteId, { now: clock.now() }))?.nodeId;
    const touch = (sessionId: string) => db.transaction((tx) => touchAgentSession(tx, { sessionId, clock }));
    const close = (sessionId: string) => db.transaction((tx) => closeAgentSession(tx, { sessionId, clock }));
    const listed = async () => (await connectedSiteAgents(db, siteId, { now: clock.now() })).map((a) => a.nodeId);

    it('is taken by the first site agent whose site session opens, and stays with it', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      expect(await bootLeaseHolder(db, siteId, { now: clock.now() })).toBeUndefined();
      await open(nodeId, 'node'); // a machine of the site
      expect(await holder()).toBeUndefined();
      const session = await open(first, 'site');
      const acquiredAt = clock.now();
      clock.advance(1000);
      await open(second, 'site');
      expect(await bootLeaseHolder(db, siteId, { now: clock.now() })).toEqual({
        siteId,
        nodeId: first,
        sessionId: session.id,
        acquiredAt,
      });
      await expect(bootLeaseHolder(db, siteId, { now: new Date(Number.NaN) })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['now'] },
      });
    });

    it('has one holder when site agents open at once', async () => {
      for (let round = 0; round < 5; round += 1) {
        await resetKernel(db, clock);
        siteId = newId('site');
        await db.query('INSERT INTO sites (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)', [
          siteId,
          'acme',
          'dc1',
          clock.now(),
        ]);
        const agents = await Promise.all([siteAgent(), siteAgent(), siteAgent(), siteAgent()]);
        // Each opener reads the lease in its own transaction once its session is open: exactly one sees itself.
        const seen = await Promise.all(
          agents.map((agent) =>
            db.transaction(async (tx) => {
              await openAgentSession(tx, { nodeId: agent, role: 'site', bootId: 'boot-1', clock });
              return (await bootLeaseHolder(tx, siteId, { now: clock.now() }))?.nodeId === agent;
            }),
          ),
        );
        expect(seen.filter(Boolean)).toHaveLength(1);
        const { rows } = await db.query<{ holder_node_id: string }>('SELECT holder_node_id FROM site_boot_leases');
        expect(rows).toHaveLength(1);
        expect(rows[0]?.holder_node_id).toBe(agents[seen.indexOf(true)]);
        expect(agents).toContain(rows[0]?.holder_node_id);
        expect(await holder()).toBe(rows[0]?.holder_node_id);
        expect((await listed())[0]).toBe(rows[0]?.holder_node_id);
      }
    });

    it('moves without deadlock while the holder closes and the agent it moves to reconnects at once', async () => {
      let holding = { node: await siteAgent(), session: '' };
      let waiting = { node: await siteAgent(), session: '' };
      holding.session = (await open(holding.node, 'site')).id;
      waiting.session = (await open(waiting.node, 'site')).id;
      for (let round = 0; round < 10; round += 1) {
        clock.advance(1000);
        const [, reopened] = await Promise.all([close(holding.session), open(waiting.node, 'site', `boot-${round}`)]);
        expect(await bootLeaseHolder(db, siteId, { now: clock.now() })).toMatchObject({
          nodeId: waiting.node,
          sessionId: reopened.id,
        });
        const returned = await open(holding.node, 'site', `boot-${round}`);
        expect(await holder()).toBe(waiting.node);
        [holding, waiting] = [
          { node: waiting.node, session: reopened.id },
          { node: holding.node, session: returned.id },
        ];
      }
    });

    it('moves to another connected site agent when the holder closes its session', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      const held = await open(first, 'site');
      const other = await open(second, 'site');
      clock.advance(1000);
      await close(held.id);
      expect(await bootLeaseHolder(db, siteId, { now: clock.now() })).toEqual({
        siteId,
        nodeId: second,
        sessionId: other.id,
        acquiredAt: clock.now(),
      });
    });

    it('moves when the holder goes stale, at the next touch of another connected site agent', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      await open(first, 'site');
      const other = await open(second, 'site');
      clock.advance(30_000);
      await touch(other.id);
      clock.advance(31_000); // the holder was last seen 61 s ago
      expect(await holder()).toBeUndefined();
      expect(await listed()).toEqual([second]);
      await touch(other.id);
      expect(await holder()).toBe(second);
    });

    it('moves away from a stale holder that touches again before anyone else', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      const held = await open(first, 'site');
      const other = await open(second, 'site');
      clock.advance(30_000);
      await touch(other.id);
      clock.advance(31_000);
      await touch(held.id); // the former holder is back on its old session
      expect(await holder()).toBe(second);
      expect(await listed()).toEqual([second, first]);
    });

    it('does not move back when the former holder returns', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      const held = await open(first, 'site');
      await open(second, 'site');
      await close(held.id);
      expect(await holder()).toBe(second);
      clock.advance(1000);
      const back = await open(first, 'site');
      clock.advance(1000);
      await touch(back.id);
      expect(await holder()).toBe(second);
      expect(await listed()).toEqual([second, first]);
    });

    it('does not stay with a holder that reconnects while another site agent is connected', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      await open(first, 'site');
      await open(second, 'site');
      clock.advance(1000);
      await open(first, 'site', 'boot-2'); // a new session ends the one that held the lease
      expect(await holder()).toBe(second);
    });

    it('has no holder while no site agent is connected, until one connects', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      const held = await open(first, 'site');
      await close(held.id);
      expect(await holder()).toBeUndefined();
      expect(await listed()).toEqual([]);
      clock.advance(1000);
      await open(nodeId, 'node');
      await open(second, 'node'); // a site agent's node that does not speak as the site agent
      expect(await holder()).toBeUndefined();
      const session = await open(second, 'site');
      expect(await bootLeaseHolder(db, siteId, { now: clock.now() })).toEqual({
        siteId,
        nodeId: second,
        sessionId: session.id,
        acquiredAt: clock.now(),
      });
    });

    it('returns to the former holder when it is the only site agent that connects again', async () => {
      const only = await siteAgent();
      const first = await open(only, 'site');
      clock.advance(61_000);
      expect(await holder()).toBeUndefined();
      await touch(first.id);
      expect(await holder()).toBe(only);
      clock.advance(61_000);
      const second = await open(only, 'site', 'boot-2');
      expect(await bootLeaseHolder(db, siteId, { now: clock.now() })).toMatchObject({ sessionId: second.id });
    });

    it('lists the holder first among the connected site agents', async () => {
      const first = await siteAgent();
      const second = await siteAgent();
      const third = await siteAgent();
      await open(first, 'site');
      clock.advance(1000);
      const sessions = [await open(second, 'site'), await open(third, 'site')];
      clock.advance(1000);
      for (const session of sessions) await touch(session.id);
      // The other two were seen last, at the same instant: by node id after the holder.
      expect(await listed()).toEqual([first, ...[second, third].sort()]);
      // Under a tighter freshness the holder, seen a second ago, is not connected: the others are listed alone.
      const fresh = await connectedSiteAgents(db, siteId, { now: clock.now(), staleAfterMs: 500 });
      expect(fresh.map((a) => a.nodeId)).toEqual([second, third].sort());
    });

    it('keeps each site its own lease', async () => {
      const otherSite = newId('site');
      await db.query('INSERT INTO sites (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)', [
        otherSite,
        'acme',
        'dc2',
        clock.now(),
      ]);
      const here = await siteAgent();
      const there = await insertNode(db, clock, 'acme', { siteId: otherSite, kind: 'site-agent' });
      await open(here, 'site');
      await open(there, 'site');
      expect(await holder()).toBe(here);
      expect((await bootLeaseHolder(db, otherSite, { now: clock.now() }))?.nodeId).toBe(there);
    });
  });
}
