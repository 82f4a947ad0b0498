import { ComputeError, type Json } from '@better-compute/core';
import { refuseInput, requireText } from '@better-compute/core/checks';
import { getNode } from '@better-compute/core/nodes';
import { type AgentApiContext, type AgentCall, type AgentMethod, callerOf } from './context';
import { optionalInteger, parseInventoryBody, requireBody, requirePublicKeyShape, requireRole } from './validate';

/**
 * The event `inventory.report` publishes, in the transaction that stores the inventory.
 *
 * @example
 * ```ts
 * compute.events.subscribe((event) => event.type === INVENTORY_REPORTED_EVENT && refresh(event.subject));
 * ```
 */
export const INVENTORY_REPORTED_EVENT = 'node.inventory-reported';

function issued(certificate: {
  nodeId: string;
  tenantId: string;
  siteId: string | null;
  role: string;
  serial: string;
  certificatePem: string;
  caCertificatePem: string;
  expiresAt: Date;
}) {
  return {
    nodeId: certificate.nodeId,
    tenantId: certificate.tenantId,
    siteId: certificate.siteId,
    role: certificate.role,
    serial: certificate.serial,
    certificatePem: certificate.certificatePem,
    caCertificatePem: certificate.caCertificatePem,
    expiresAt: certificate.expiresAt.toISOString(),
  };
}

async function join(ctx: AgentApiContext, call: AgentCall) {
  const body = requireBody(call.body, ['token', 'publicKey', 'claims']);
  const token = requireText(body.token, ['token'], { max: 1024 });
  const publicKey = requirePublicKeyShape(body.publicKey);
  if (body.claims !== undefined && (typeof body.claims !== 'object' || body.claims === null)) {
    refuseInput('claims must be an object', ['claims']);
  }
  const joined = await ctx.compute.database.transaction((tx) =>
    ctx.pki.joinAgent(tx, { token, publicKey, ...(body.claims === undefined ? {} : { claims: body.claims }) }),
  );
  return issued(joined);
}

async function renew(ctx: AgentApiContext, call: AgentCall) {
  const caller = callerOf(call);
  const body = requireBody(call.body, ['publicKey']);
  const publicKey = body.publicKey === undefined ? undefined : requirePublicKeyShape(body.publicKey);
  const next = await ctx.compute.database.transaction((tx) =>
    ctx.pki.renewAgentCertificate(tx, {
      certificatePem: caller.certificatePem,
      ...(publicKey === undefined ? {} : { publicKey }),
    }),
  );
  return issued(next);
}

async function openSession(ctx: AgentApiContext, call: AgentCall) {
  const { nodeId } = callerOf(call);
  const body = requireBody(call.body, ['role', 'bootId']);
  const role = requireRole(body.role);
  const bootId = requireText(body.bootId, ['bootId'], { max: 256 });
  const session = await ctx.sessions.open(nodeId, role, bootId);
  return {
    sessionId: session.id,
    nodeId: session.nodeId,
    role: session.role,
    bootId: session.bootId,
    connectedAt: session.connectedAt.toISOString(),
  };
}

async function closeSession(ctx: AgentApiContext, call: AgentCall) {
  const { nodeId } = callerOf(call);
  requireBody(call.body, []);
  return { closed: await ctx.sessions.close(nodeId) };
}

// Stored under facts.reported (the rest of facts, metal's inspection among them, is left alone), with the event in
// the same transaction, so a rolled-back report publishes nothing.
async function reportInventory(ctx: AgentApiContext, call: AgentCall) {
  const { nodeId } = callerOf(call);
  const inventory = parseInventoryBody(call.body);
  const now = ctx.clock.now();
  const reported = { at: now.toISOString(), inventory } as Json;
  await ctx.compute.database.transaction(async (tx) => {
    const { rows } = await tx.query<{ tenant_id: string }>(
      `UPDATE nodes SET facts = jsonb_set(facts, '{reported}', $2::jsonb, true), updated_at = $3
       WHERE id = $1 RETURNING tenant_id`,
      [nodeId, JSON.stringify(reported), now],
    );
    const tenantId = rows[0]?.tenant_id;
    if (tenantId === undefined) throw nodeGone(nodeId);
    await ctx.compute.events.publish(tx, {
      tenantId,
      subject: `node/${nodeId}`,
      type: INVENTORY_REPORTED_EVENT,
      data: { nodeId, reportedAt: now.toISOString() },
    });
  });
  return { reportedAt: now.toISOString() };
}

function nodeGone(nodeId: string): ComputeError {
  return new ComputeError('NOT_FOUND', `node ${nodeId} not found`, { details: { path: ['nodeId'] } });
}

async function getSpec(ctx: AgentApiContext, call: AgentCall) {
  const { nodeId } = callerOf(call);
  requireBody(call.body, []);
  const node = await getNode(ctx.compute.database, nodeId);
  if (!node) throw nodeGone(nodeId);
  return { spec: node.spec, generation: Number(node.generation), observedGeneration: Number(node.observedGeneration) };
}

async function reportSpec(ctx: AgentApiContext, call: AgentCall) {
  const { nodeId } = callerOf(call);
  const body = requireBody(call.body, ['observedGeneration']);
  const observed = optionalInteger(body.observedGeneration, ['observedGeneration'], 0, Number.MAX_SAFE_INTEGER);
  if (observed === undefined) refuseInput('observedGeneration is required', ['observedGeneration']);
  const { rows } = await ctx.compute.database.query<{ generation: number; observed_generation: number }>(
    `UPDATE nodes SET observed_generation = $2, updated_at = $3 WHERE id = $1 AND generation >= $2
     RETURNING generation, observed_generation`,
    [nodeId, observed, ctx.clock.now()],
  );
  const row = rows[0];
  if (row) return { generation: Number(row.generation), observedGeneration: Number(row.observed_generation) };
  const node = await getNode(ctx.compute.database, nodeId);
  if (!node) throw nodeGone(nodeId);
  throw new ComputeError('INVALID_INPUT', `observedGeneration must not exceed the generation (${node.generation})`, {
    details: { path: ['observedGeneration'], generation: node.generation },
  });
}

/**
 * The node methods of the agent API: `join` (the one method without a certificate), `certificates.renew`,
 * `sessions.open`, `sessions.close`, `inventory.report`, `spec.get` and `spec.report`.
 *
 * @example
 * ```ts
 * const spec = await NODE_METHODS['spec.get'].run(ctx, { body: {}, caller, signal });
 * ```
 */
export const NODE_METHODS: Readonly<Record<string, AgentMethod>> = {
  join: { authenticated: false, run: join },
  'certificates.renew': { authenticated: true, run: renew },
  'sessions.open': { authenticated: true, run: openSession },
  'sessions.close': { authenticated: true, run: closeSession },
  'inventory.report': { authenticated: true, run: reportInventory },
  'spec.get': { authenticated: true, run: getSpec },
  'spec.report': { authenticated: true, run: reportSpec },
};
