import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type AgentRole,
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
}
