import { getTableColumns } from 'drizzle-orm';
import { requireText } from '../commands/command-input';
import { ComputeError, type ErrorPath } from '../errors';
import { newId } from '../ids';
import { checkJson } from '../json/check-json';
import { findUnstorableText } from '../json/storable-text';
import { type Labels, validateLabels } from '../labels';
import { nodes } from '../schema/tenancy';
import type { SqlExecutor } from '../sql/executor';

/**
 * A `nodes` row as the repository returns it: the drizzle schema's own row type (`typeof nodes.$inferSelect`), so
 * the table's definition is the one source of its shape. `generation` and `observedGeneration` are numbers.
 *
 * @example
 * ```ts
 * const node: NodeRow | undefined = await getNode(sql, 'node_01k…');
 * if (node && node.observedGeneration < node.generation) console.log('the agent has not applied its spec yet');
 * ```
 */
export type NodeRow = typeof nodes.$inferSelect;

/**
 * What {@link createNode} takes: the tenant and the kind; everything else is optional. The id defaults to
 * `newId('node')`; `spec`, `generation` and `observedGeneration` start at the column defaults.
 *
 * @example
 * ```ts
 * const input: NewNode = { tenantId: 'acme', kind: 'machine', siteId, poolId: 'gpu-a', provisionState: 'enrolling' };
 * ```
 */
export interface NewNode {
  tenantId: string;
  /** `machine`, `site-agent`, or any kind a module uses. */
  kind: string;
  id?: string;
  siteId?: string | null;
  poolId?: string | null;
  name?: string | null;
  /** The lifecycle state a provisioning module keeps (metal: enrolling, available, deployed, …). */
  provisionState?: string | null;
  /** A flat string map, checked like the kernel checks labels (INVALID_INPUT at `['labels', key]`). */
  labels?: Labels;
}

/**
 * How {@link getNode} reads: only within a tenant (another tenant's node reads as missing), and whether to lock the
 * row (`FOR UPDATE`) for the rest of the caller's transaction.
 *
 * @example
 * ```ts
 * const options: GetNodeOptions = { tenantId: 'acme', forUpdate: true };
 * ```
 */
export interface GetNodeOptions {
  tenantId?: string;
  forUpdate?: boolean;
}

// The select list from the schema: every column under its row-type name, so a row needs no mapping.
const COLUMNS = Object.entries(getTableColumns(nodes))
  .map(([key, column]) => `"${column.name}" AS "${key}"`)
  .join(', ');

function invalid(path: ErrorPath, message: string): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path } });
}

function optionalText(value: unknown, path: ErrorPath): string | null {
  return value === undefined || value === null ? null : requireText(value, path);
}

function requireNow(now: unknown): Date {
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) throw invalid(['now'], 'now must be a valid Date');
  return now;
}

function requireGeneration(value: unknown, path: ErrorPath): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalid(path, `${path.join('.')} must be a non-negative integer`);
  }
  return value;
}

async function updateOne(
  sql: SqlExecutor,
  set: string,
  nodeId: unknown,
  now: unknown,
  params: unknown[],
): Promise<NodeRow | undefined> {
  const id = requireText(nodeId, ['nodeId']);
  const at = requireNow(now);
  const { rows } = await sql.query<NodeRow>(
    `UPDATE nodes SET ${set}, updated_at = $2 WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, at, ...params],
  );
  return rows[0];
}

/**
 * Inserts a node and returns its row. Ids and text must be non-empty strings of at most 512 characters PostgreSQL can
 * store (no NUL, no lone surrogate), labels a valid label map: otherwise INVALID_INPUT at the field, and nothing is
 * written. The tenant (and site, when given) must exist; an id in use fails as the database's unique violation.
 *
 * @example
 * ```ts
 * const node = await createNode(tx, { tenantId: 'acme', kind: 'machine', provisionState: 'enrolling' }, clock.now());
 * node.id; // 'node_01k…'
 * ```
 */
export async function createNode(sql: SqlExecutor, input: NewNode, now: Date): Promise<NodeRow> {
  if (typeof input !== 'object' || input === null) throw invalid([], 'a new node must be an object');
  const tenantId = requireText(input.tenantId, ['tenantId']);
  const kind = requireText(input.kind, ['kind']);
  const id = input.id === undefined ? newId('node') : requireText(input.id, ['id']);
  const siteId = optionalText(input.siteId, ['siteId']);
  const poolId = optionalText(input.poolId, ['poolId']);
  const name = optionalText(input.name, ['name']);
  const provisionState = optionalText(input.provisionState, ['provisionState']);
  const labels = validateLabels(input.labels ?? {}, ['labels'], 'INVALID_INPUT');
  const at = requireNow(now);
  const { rows } = await sql.query<NodeRow>(
    `INSERT INTO nodes (id, tenant_id, site_id, pool_id, kind, name, provision_state, labels, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $9) RETURNING ${COLUMNS}`,
    [id, tenantId, siteId, poolId, kind, name, provisionState, JSON.stringify(labels), at],
  );
  return rows[0] as NodeRow;
}

/**
 * Reads a node, or undefined when there is none (or it belongs to another tenant than `options.tenantId`). With
 * `forUpdate` the row stays locked until the caller's transaction ends.
 *
 * @example
 * ```ts
 * const node = await getNode(tx, nodeId, { tenantId: 'acme', forUpdate: true });
 * ```
 */
export async function getNode(
  sql: SqlExecutor,
  nodeId: string,
  options: GetNodeOptions = {},
): Promise<NodeRow | undefined> {
  const id = requireText(nodeId, ['nodeId']);
  const params: unknown[] = [id];
  let text = `SELECT ${COLUMNS} FROM nodes WHERE id = $1`;
  if (options.tenantId !== undefined) {
    params.push(requireText(options.tenantId, ['tenantId']));
    text += ' AND tenant_id = $2';
  }
  if (options.forUpdate === true) text += ' FOR UPDATE';
  const { rows } = await sql.query<NodeRow>(text, params);
  return rows[0];
}

/**
 * Replaces a node's labels (checked as the kernel checks labels: INVALID_INPUT at `['labels', key]`). Returns the
 * updated row, or undefined when there is no such node. The generation is left alone: labels are not the spec.
 *
 * @example
 * ```ts
 * await setNodeLabels(tx, nodeId, { ...node.labels, rack: 'r12' }, clock.now());
 * ```
 */
export async function setNodeLabels(
  sql: SqlExecutor,
  nodeId: string,
  labels: Labels,
  now: Date,
): Promise<NodeRow | undefined> {
  const checked = validateLabels(labels, ['labels'], 'INVALID_INPUT');
  return updateOne(sql, 'labels = $3::jsonb', nodeId, now, [JSON.stringify(checked)]);
}

/**
 * Replaces what is known about a node (`facts`: metal's hardware inventory, for one), leaving its labels, spec and
 * generation alone. `facts` must be a plain JSON object PostgreSQL can store: anything else (an array, a Date, a NUL
 * or a lone surrogate in a string or key, …) is INVALID_INPUT at its path under `['facts']`, and nothing is written.
 * Returns the updated row, or undefined when there is no such node.
 *
 * @example
 * ```ts
 * await setNodeFacts(tx, nodeId, { gpus: [{ model: 'H100', memoryMiB: 81_559 }], cpu: { cores: 96 } }, clock.now());
 * ```
 */
export async function setNodeFacts(
  sql: SqlExecutor,
  nodeId: string,
  facts: Record<string, unknown>,
  now: Date,
): Promise<NodeRow | undefined> {
  if (typeof facts !== 'object' || facts === null || Array.isArray(facts)) {
    throw invalid(['facts'], 'facts must be a JSON object');
  }
  const issue = checkJson(facts, ['facts']);
  if (issue) throw invalid(issue.path, `${issue.path.join('.')}: ${issue.message}`);
  return updateOne(sql, 'facts = $3::jsonb', nodeId, now, [JSON.stringify(facts)]);
}

/**
 * Sets a node's lifecycle state (metal's enrolling, available, deployed, …; null clears it). Returns the updated row,
 * or undefined when there is no such node.
 *
 * @example
 * ```ts
 * await setNodeProvisionState(tx, nodeId, 'available', clock.now());
 * ```
 */
export async function setNodeProvisionState(
  sql: SqlExecutor,
  nodeId: string,
  state: string | null,
  now: Date,
): Promise<NodeRow | undefined> {
  const checked = optionalText(state, ['provisionState']);
  return updateOne(sql, 'provision_state = $3', nodeId, now, [checked]);
}

/**
 * Adds one to a node's `generation`: its desired state changed, and its agent should apply it and report the new
 * generation back. Returns the updated row, or undefined when there is no such node.
 *
 * @example
 * ```ts
 * const node = await bumpNodeGeneration(tx, nodeId, clock.now());
 * node?.generation; // one more than before
 * ```
 */
export async function bumpNodeGeneration(sql: SqlExecutor, nodeId: string, now: Date): Promise<NodeRow | undefined> {
  return updateOne(sql, 'generation = generation + 1', nodeId, now, []);
}

/**
 * Records the generation of the spec a node's agent has applied (a non-negative integer; INVALID_INPUT at
 * `['observedGeneration']` otherwise). Returns the updated row, or undefined when there is no such node.
 *
 * @example
 * ```ts
 * await setNodeObservedGeneration(sql, nodeId, 3, clock.now());
 * ```
 */
export async function setNodeObservedGeneration(
  sql: SqlExecutor,
  nodeId: string,
  observedGeneration: number,
  now: Date,
): Promise<NodeRow | undefined> {
  const generation = requireGeneration(observedGeneration, ['observedGeneration']);
  return updateOne(sql, 'observed_generation = $3', nodeId, now, [generation]);
}

/**
 * Sets the `host` section of a node's spec (the rest of the spec kept; a spec that is not an object starts over as
 * one) and bumps its `generation`, in one statement. `host` is stored as `JSON.stringify` writes it; a string or key
 * PostgreSQL cannot store (a NUL, a lone surrogate) is INVALID_INPUT at its path under `['host']`. Returns the updated
 * row, or undefined when there is no such node.
 *
 * @example
 * ```ts
 * await setNodeHostSection(tx, nodeId, { units: [{ name: 'mig', settings: { profile: '1g.10gb' } }] }, clock.now());
 * ```
 */
export async function setNodeHostSection(
  sql: SqlExecutor,
  nodeId: string,
  host: object,
  now: Date,
): Promise<NodeRow | undefined> {
  if (typeof host !== 'object' || host === null || Array.isArray(host)) {
    throw invalid(['host'], 'host must be an object');
  }
  const unstorable = findUnstorableText(host, ['host']);
  if (unstorable) throw invalid(unstorable.path, `${unstorable.path.join('.')} ${unstorable.message}`);
  return updateOne(
    sql,
    `spec = jsonb_set(CASE WHEN jsonb_typeof(spec) = 'object' THEN spec ELSE '{}'::jsonb END, '{host}', $3::jsonb),
     generation = generation + 1`,
    nodeId,
    now,
    [JSON.stringify(host)],
  );
}
