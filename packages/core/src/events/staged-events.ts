import type { StagedEvent } from './types';

/**
 * The body of a data-modifying CTE that inserts staged events (see `EventStaging.stage`), in order, from one jsonb
 * parameter built by {@link stagedEventsParam}. `condition` gates the insert on the rest of the statement, so an event
 * is written only with the change it describes.
 *
 * @example
 * ```ts
 * const text = `WITH changed AS (UPDATE nodes SET state = $2 WHERE id = $1 RETURNING id),
 *   published AS (${stagedEventsInsertSql('$3', 'EXISTS (SELECT 1 FROM changed)')})
 *   SELECT count(*) FROM changed`;
 * await sql.query(text, [id, 'ready', stagedEventsParam([bus.stage(event)])]);
 * ```
 */
export function stagedEventsInsertSql(param: string, condition = 'TRUE'): string {
  // jsonb_array_elements keeps a JSON null `data` a JSON null (jsonb_to_recordset would make it SQL NULL).
  return `INSERT INTO events (id, tenant_id, subject, type, data, at)
    SELECT e->>'id', e->>'tenantId', e->>'subject', e->>'type', e->'data', (e->>'at')::timestamptz
    FROM jsonb_array_elements(${param}::jsonb) WITH ORDINALITY AS staged(e, ord)
    WHERE ${condition} ORDER BY staged.ord`;
}

/**
 * The parameter {@link stagedEventsInsertSql} reads: the staged events as JSON text.
 *
 * @example
 * ```ts
 * const param = stagedEventsParam([bus.stage({ tenantId, subject, type: 'node.ready', data: {} })]);
 * ```
 */
export function stagedEventsParam(events: readonly StagedEvent[]): string {
  return JSON.stringify(events.map((event) => ({ ...event, at: event.at.toISOString() })));
}
