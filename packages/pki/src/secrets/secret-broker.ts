import {
  type Clock,
  ComputeError,
  isId,
  type Logger,
  newId,
  type SecretBroker,
  type SecretRef,
  type SqlExecutor,
} from '@better-compute/core';
import { silentLogger } from '@better-compute/core/kernel';
import { open, seal } from '../crypto/aead';
import { requireString } from '../tokens/validate';

/** What the broker needs: the database, the at-rest key, the clock and a logger. */
export interface SecretBrokerDeps {
  key: Uint8Array;
  clock: Clock;
  log?: Logger;
}

/** The largest value the broker stores: 1 MiB of UTF-8. */
export const MAX_SECRET_BYTES = 1024 * 1024;

function context(id: string, tenantId: string): string {
  return `pki-secret:${id}:${tenantId}`;
}

/**
 * A secret's value sealed for its row: bound to its id and tenant, so a sealed value copied to another row does not
 * open.
 *
 * @example
 * ```ts
 * const sealed = sealSecret(key, 'sec_01k…', 'root', value);
 * ```
 */
export function sealSecret(key: Uint8Array, id: string, tenantId: string, value: string): string {
  return seal(key, context(id, tenantId), new TextEncoder().encode(value));
}

function requireRef(ref: unknown, path: (string | number)[] = ['ref']): SecretRef {
  if (!isId(ref, 'sec'))
    throw new ComputeError('INVALID_INPUT', 'not a secret reference (sec_…)', { details: { path } });
  return ref;
}

async function readSecret(sql: SqlExecutor, ref: SecretRef, key: Uint8Array): Promise<string | undefined> {
  const { rows } = await sql.query<{ tenant_id: string; sealed_value: string }>(
    'SELECT tenant_id, sealed_value FROM pki_secrets WHERE id = $1',
    [ref],
  );
  const row = rows[0];
  return row ? openSealed(key, ref, row) : undefined;
}

// A stored secret's value, from its row (sealed under its id and tenant).
function openSealed(key: Uint8Array, ref: SecretRef, row: { tenant_id: string; sealed_value: string }): string {
  return new TextDecoder().decode(open(key, context(ref, row.tenant_id), row.sealed_value));
}

// A value checked and sealed for a new reference (`put`, `stagePut`).
function sealForPut(key: Uint8Array, tenantId: unknown, value: unknown): { id: string; sealed: string } {
  requireString(tenantId, ['tenantId']);
  if (typeof value !== 'string' || Buffer.byteLength(value, 'utf8') > MAX_SECRET_BYTES) {
    throw new ComputeError('INVALID_INPUT', `a secret value is a string of at most ${MAX_SECRET_BYTES} bytes`, {
      details: { path: ['value'] },
    });
  }
  const id = newId('sec');
  return { id, sealed: sealSecret(key, id, tenantId as string, value) };
}

// One statement: stored only in a tenant that exists.
async function insertSealed(sql: SqlExecutor, id: string, tenantId: string, sealed: string, now: Date): Promise<void> {
  const { rowCount } = await sql.query(
    `INSERT INTO pki_secrets (id, tenant_id, sealed_value, created_at)
     SELECT $1::text, $2::text, $3::text, $4::timestamptz WHERE EXISTS (SELECT 1 FROM tenants WHERE id = $2)`,
    [id, tenantId, sealed, now],
  );
  if (rowCount === 0) throw new ComputeError('NOT_FOUND', 'no such tenant', { details: { path: ['tenantId'] } });
}

/**
 * The secret broker: values sealed with AES-256-GCM under the configured key (bound to their id and tenant), only
 * `sec_…` references leave it. `resolve` of an unknown reference is NOT_FOUND; a malformed one INVALID_INPUT.
 *
 * @example
 * ```ts
 * const secrets = createSecretBroker(sql, { key, clock });
 * const ref = await secrets.put('root', document);
 * ```
 */
export function createSecretBroker(sql: SqlExecutor, deps: SecretBrokerDeps): Required<SecretBroker> {
  return {
    async put(tenantId, value) {
      const { id, sealed } = sealForPut(deps.key, tenantId, value);
      await insertSealed(sql, id, tenantId, sealed, deps.clock.now());
      return id;
    },
    stagePut(tenantId, value) {
      const { id, sealed } = sealForPut(deps.key, tenantId, value);
      const now = deps.clock.now();
      return {
        ref: id,
        write: {
          changes: [
            {
              name: 'secret_put',
              sql: ({ bind, guard }) =>
                `INSERT INTO pki_secrets (id, tenant_id, sealed_value, created_at)
                 SELECT ${bind(id)}::text, ${bind(tenantId)}::text, ${bind(sealed)}::text, ${bind(now)}::timestamptz
                 WHERE ${guard}`,
              requires: ({ bind }) => `EXISTS (SELECT 1 FROM tenants WHERE id = ${bind(tenantId)})`,
            },
          ],
          write: (tx) => insertSealed(tx, id, tenantId, sealed, now),
        },
      };
    },
    async resolve(ref) {
      const value = await readSecret(sql, requireRef(ref), deps.key);
      if (value === undefined) throw new ComputeError('NOT_FOUND', 'no such secret', { details: { path: ['ref'] } });
      return value;
    },
    async delete(ref) {
      await sql.query('DELETE FROM pki_secrets WHERE id = $1', [requireRef(ref)]);
    },
    stageDelete(refs) {
      const ids = refs.map((ref, index) => requireRef(ref, ['refs', index]));
      return {
        changes: [
          {
            name: 'secrets_deleted',
            sql: ({ bind, guard }) => `DELETE FROM pki_secrets WHERE id = ANY(${bind(ids)}::text[]) AND ${guard}`,
          },
        ],
        async write(tx) {
          await tx.query('DELETE FROM pki_secrets WHERE id = ANY($1::text[])', [ids]);
        },
      };
    },
  };
}

// A workflow step's command key: wf:<workflow>:<step>, then an optional #<attempt>, then an optional :<key>.
const STEP_COMMAND_KEY = '^wf:[^:#]+:[^:#]+(#[0-9]+)?(:.*)?$';

// The conditions a command carrying the secret meets: live, a workflow step's, the reference anywhere in its payload.
const CARRIES_SQL = `c.not_after > $3 AND c.key ~ '${STEP_COMMAND_KEY}'
  AND jsonb_path_exists(c.payload, '$.** ? (@ == $ref)', jsonb_build_object('ref', $2::text))`;

// Any open command of the agent's: looked up by node and state together, once per open state, so a site agent with
// years of settled commands is not scanned through them on every fetch (an index on the node alone would be).
const CARRIED_BY_ANY_SQL = `SELECT c.id, s.tenant_id, s.sealed_value
  FROM unnest(ARRAY['pending', 'dispatched', 'acked', 'running']) AS open (state)
  JOIN commands c ON c.node_id = $1 AND c.state = open.state
  JOIN pki_secrets s ON s.id = $2 AND s.tenant_id = c.tenant_id
  WHERE ${CARRIES_SQL}
  ORDER BY c.id LIMIT 1`;

// The command the agent names (by its id, as the agent API's `commandId`): one row, by its key.
const CARRIED_BY_ONE_SQL = `SELECT c.id, s.tenant_id, s.sealed_value FROM commands c JOIN pki_secrets s ON s.id = $2 AND s.tenant_id = c.tenant_id
  WHERE c.id = $4 AND c.node_id = $1 AND c.state IN ('pending', 'dispatched', 'acked', 'running') AND ${CARRIES_SQL}`;

/**
 * What an agent may fetch: a secret's value, only while a live command (pending, dispatched, acked or running, not
 * past `not_after` under the Clock) of a workflow step for that agent carries the reference anywhere in its payload,
 * in the secret's own tenant; with `commandId`, that command must be the one (one row read instead of the agent's open
 * commands). Anything else is NOT_FOUND (reason `not-carried`), so an agent cannot probe which references exist;
 * refusals and grants are logged with the agent, the reference and the command, never the value.
 *
 * @example
 * ```ts
 * const value = await fetchSecretForAgent(sql, { agentNodeId: session.nodeId, ref }, { key, clock, log });
 * ```
 */
export async function fetchSecretForAgent(
  sql: SqlExecutor,
  input: { agentNodeId: string; ref: string; commandId?: string },
  deps: SecretBrokerDeps,
): Promise<string> {
  const log = deps.log ?? silentLogger;
  const agentNodeId = requireString(input?.agentNodeId, ['agentNodeId']);
  const ref = requireRef(input.ref);
  const commandId = input.commandId === undefined ? undefined : requireString(input.commandId, ['commandId']);
  // The command that carries the reference and the sealed secret, by one statement.
  const { rows } = await sql.query<{ id: string; tenant_id: string; sealed_value: string }>(
    commandId === undefined ? CARRIED_BY_ANY_SQL : CARRIED_BY_ONE_SQL,
    [agentNodeId, ref, deps.clock.now(), ...(commandId === undefined ? [] : [commandId])],
  );
  const command = rows[0];
  if (!command) {
    log.warn('secret fetch refused', { agentNodeId, ref, reason: 'not-carried' });
    throw new ComputeError('NOT_FOUND', 'no such secret for this agent', {
      details: { path: ['ref'], reason: 'not-carried' },
    });
  }
  const value = openSealed(deps.key, ref, command);
  log.info('secret fetched by agent', { agentNodeId, ref, commandId: command.id });
  return value;
}
