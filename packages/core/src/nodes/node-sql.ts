import { getTableColumns } from 'drizzle-orm';
import { nodes } from '../schema/tenancy';
import type { NodeRow } from './node-repository';

const COLUMN_NAMES = Object.fromEntries(
  Object.entries(getTableColumns(nodes)).map(([key, column]) => [key, column.name]),
) as Record<keyof NodeRow, string>;

const ALIAS = /^[a-z_][a-z0-9_]*$/;

function checkAlias(alias: string): string {
  if (!ALIAS.test(alias)) throw new TypeError(`'${alias}' is not a plain SQL alias`);
  return alias;
}

/**
 * The SQL of a `nodes` column by its {@link NodeRow} name, qualified by `alias` when given: the name comes from the
 * drizzle schema, so a statement that reads a node beside other rows (in one round trip) does not spell the table's
 * shape itself. For reads that are only a node, use `getNode`.
 *
 * @example
 * ```ts
 * nodeColumnSql('siteId', 'n'); // 'n."site_id"'
 * nodeColumnSql('labels'); // '"labels"'
 * ```
 */
export function nodeColumnSql(key: keyof NodeRow, alias?: string): string {
  const name = COLUMN_NAMES[key];
  if (name === undefined) throw new TypeError(`nodes has no column '${String(key)}'`);
  return alias === undefined ? `"${name}"` : `${checkAlias(alias)}."${name}"`;
}

/**
 * A `LEFT JOIN` of the node whose id is the SQL expression `id`, as `alias` (its columns by {@link nodeColumnSql}; all
 * NULL when there is no such node).
 *
 * @example
 * ```ts
 * const text = `SELECT w.*, ${nodeColumnSql('labels', 'n')} AS node_labels FROM workflows w ${joinNodeSql('n', 'w.node_id')}`;
 * ```
 */
export function joinNodeSql(alias: string, id: string): string {
  const a = checkAlias(alias);
  return `LEFT JOIN nodes ${a} ON ${nodeColumnSql('id', a)} = ${id}`;
}

/**
 * A condition that holds while the node whose id is the SQL expression `id` exists with exactly the labels of the
 * SQL expression `labels` (a jsonb value): a guard a statement can AND into its `WHERE` when it acts on labels it read
 * earlier.
 *
 * @example
 * ```ts
 * const guard = nodeHasLabelsSql(bind(node.id), `${bind(JSON.stringify(node.labels))}::jsonb`);
 * ```
 */
export function nodeHasLabelsSql(id: string, labels: string): string {
  return `EXISTS (SELECT 1 FROM nodes WHERE ${nodeColumnSql('id')} = ${id} AND ${nodeColumnSql('labels')} = ${labels})`;
}
