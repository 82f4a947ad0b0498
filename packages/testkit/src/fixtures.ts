import { type Clock, ComputeError, newId, type SqlExecutor } from '@better-compute/core';
import { createNode } from '@better-compute/core/nodes';

/**
 * What {@link insertSite} takes; everything has a default.
 *
 * @example
 * ```ts
 * const input: InsertSiteInput = { tenantId: 'acme', name: 'fra1' };
 * ```
 */
export interface InsertSiteInput {
  /** Default `root`. A tenant that does not exist yet is created (named after its id). */
  tenantId?: string;
  /** Default `newId('site')`. */
  id?: string;
  /** Default: the id. */
  name?: string;
}

/**
 * What {@link insertNode} takes; everything has a default.
 *
 * @example
 * ```ts
 * const input: InsertNodeInput = { kind: 'site-agent', siteId, labels: { rack: 'r12' } };
 * ```
 */
export interface InsertNodeInput {
  /** Default `root`. A tenant that does not exist yet is created (named after its id). */
  tenantId?: string;
  /** Default `newId('node')`. */
  id?: string;
  /** `machine` (the default) or `site-agent`, or any kind a module uses. */
  kind?: string;
  siteId?: string;
  poolId?: string;
  /** A flat string map, checked like the kernel checks labels (INVALID_INPUT at `['labels', key]`). */
  labels?: Record<string, string>;
  name?: string;
}

function text(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 512) {
    throw new ComputeError('INVALID_INPUT', `${path} must be a non-empty string of at most 512 characters`, {
      details: { path: [path] },
    });
  }
  return value;
}

async function ensureTenant(sql: SqlExecutor, tenantId: string, now: Date): Promise<void> {
  await sql.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT (id) DO NOTHING', [
    tenantId,
    now,
  ]);
}

/**
 * Inserts a row into `sites` (creating its tenant when missing) and returns the site id. `created_at` comes from
 * `clock`. Give it a transaction to roll it back with the rest of a test's writes, or the database handle.
 *
 * @example
 * ```ts
 * const siteId = await insertSite(compute.database, { name: 'fra1' }, clock);
 * ```
 */
export async function insertSite(sql: SqlExecutor, input: InsertSiteInput, clock: Clock): Promise<string> {
  const tenantId = text(input.tenantId ?? 'root', 'tenantId');
  const id = text(input.id ?? newId('site'), 'id');
  const name = text(input.name ?? id, 'name');
  const now = clock.now();
  await ensureTenant(sql, tenantId, now);
  await sql.query('INSERT INTO sites (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)', [
    id,
    tenantId,
    name,
    now,
  ]);
  return id;
}

/**
 * Inserts a row into `nodes` through the kernel's node repository (`createNode` of `@better-compute/core/nodes`),
 * creating its tenant when missing, and returns the node id. `created_at` and `updated_at` come from `clock`; `spec`,
 * `generation` and `provision_state` keep their column defaults. A `siteId` must name an existing site (see
 * {@link insertSite}). The tenant and the node are written together (a savepoint in the caller's transaction), so
 * input the repository refuses leaves no tenant behind.
 *
 * @example
 * ```ts
 * const siteId = await insertSite(compute.database, {}, clock);
 * const agentId = await insertNode(compute.database, { kind: 'site-agent', siteId }, clock);
 * const nodeId = await insertNode(compute.database, { siteId, labels: { rack: 'r12' } }, clock);
 * ```
 */
export async function insertNode(sql: SqlExecutor, input: InsertNodeInput, clock: Clock): Promise<string> {
  const tenantId = text(input.tenantId ?? 'root', 'tenantId');
  const now = clock.now();
  return sql.transaction(async (tx) => {
    await ensureTenant(tx, tenantId, now);
    const node = await createNode(
      tx,
      {
        tenantId,
        kind: input.kind ?? 'machine',
        ...(input.id === undefined ? {} : { id: input.id }),
        ...(input.siteId === undefined ? {} : { siteId: input.siteId }),
        ...(input.poolId === undefined ? {} : { poolId: input.poolId }),
        ...(input.name === undefined ? {} : { name: input.name }),
        ...(input.labels === undefined ? {} : { labels: input.labels }),
      },
      now,
    );
    return node.id;
  });
}
