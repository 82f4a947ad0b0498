import {
  type ApiCallContext,
  ComputeError,
  defineApiGroup,
  defineApiMethod,
  type ErrorPath,
  isSqlError,
  type ModuleContext,
  parseWhen,
  type ResourceRef,
  resolveNodeResource,
  resolveTenantResource,
  resourceNotFound,
  type SqlExecutor,
  validateLabels,
  type WhenTerm,
} from '@better-compute/core';
import { createNode, setNodeLabels } from '@better-compute/core/nodes';
import * as v from 'valibot';
import { decideRequest, type LifecycleVerb, type RequestOptions } from '../lifecycle/decide';
import { NODE_STATES } from '../lifecycle/states';
import { applyMove, type PhaseProfiles } from '../machines/apply-move';
import { forgetBootEntrySecrets, forgetSecretsAfterCommit } from '../machines/boot-entry-secrets';
import {
  type DeployRequest,
  MACHINE_COLUMNS,
  MACHINE_FROM,
  readMachine,
  snapshotOf,
  toMachineRecord,
} from '../machines/machine-rows';
import { decodeMachineCursor, encodeMachineCursor, METAL_DEFAULT_LIMIT, METAL_MAX_LIMIT } from './cursor';
import {
  bmcSchema,
  checkBmcAddress,
  checkMacs,
  checkStorable,
  invalidInput,
  labelsSchema,
  macsSchema,
  textSchema,
} from './inputs';
import {
  ACTIVE_STATES_PARAM,
  ACTIVE_WORKFLOW_LATERAL,
  type MachineSummary,
  type MachineView,
  machineAwaiting,
  machineView,
  toSummary,
  workflowOf,
} from './views';

/** The resource type of a site, the one `metal.enroll`, `metal.adopt` and `sites.joinToken` are decided on. */
export const COMPUTE_SITE = 'compute-site';

/**
 * Resolves `{ tenantId, siteId }` to the site's resource (`compute-site`). A missing site and another tenant's are the
 * same NOT_FOUND at `['siteId']`.
 *
 * @example
 * ```ts
 * resource: (input, ctx) => resolveSiteResource(ctx.sql, input.tenantId, input.siteId),
 * ```
 */
export async function resolveSiteResource(sql: SqlExecutor, tenantId: string, siteId: string): Promise<ResourceRef> {
  const path = ['siteId'];
  if (typeof tenantId !== 'string' || typeof siteId !== 'string') throw resourceNotFound(COMPUTE_SITE, path);
  const { rowCount } = await sql.query('SELECT 1 FROM sites WHERE id = $1 AND tenant_id = $2', [siteId, tenantId]);
  if (rowCount === 0) throw resourceNotFound(COMPUTE_SITE, path);
  return { type: COMPUTE_SITE, tenantId, id: siteId, path };
}

const nodeInput = { tenantId: textSchema('tenantId'), nodeId: textSchema('nodeId') };
const onNode = (input: { tenantId: string; nodeId: string }, ctx: ModuleContext) =>
  resolveNodeResource(ctx.sql, input.tenantId, input.nodeId);
const onSite = (input: { tenantId: string; siteId: string }, ctx: ModuleContext) =>
  resolveSiteResource(ctx.sql, input.tenantId, input.siteId);

/** A node that is not one of metal's machines reads as missing, like another tenant's. */
function machineNotFound(): ComputeError {
  return resourceNotFound('compute-node', ['nodeId']);
}

const MAX_USER_DATA = 1_048_576;

const newMachineInput = {
  tenantId: textSchema('tenantId'),
  siteId: textSchema('siteId'),
  name: v.optional(textSchema('name', 253)),
  bmc: bmcSchema,
  macs: macsSchema,
  labels: v.optional(labelsSchema),
  pool: v.optional(textSchema('pool', 128)),
};

type NewMachineInput = {
  tenantId: string;
  siteId: string;
  name?: string | undefined;
  bmc: { address: string; driver: string; username?: string | undefined; password?: string | undefined };
  macs: string[];
  labels?: Record<string, string> | undefined;
  pool?: string | undefined;
};

function requireSecrets(ctx: ModuleContext, path: ErrorPath) {
  if (!ctx.secrets) {
    throw new ComputeError('INVALID_CONFIG', 'storing a secret needs ctx.secrets (install pki or pass secrets)', {
      details: { path },
    });
  }
  return ctx.secrets;
}

/** Stores a value through ctx.secrets for the duration of `use`; deletes it again when `use` fails. */
async function withSecret<T>(
  ctx: ModuleContext,
  tenantId: string,
  value: string | undefined,
  path: ErrorPath,
  use: (ref: string | undefined) => Promise<T>,
): Promise<T> {
  if (value === undefined) return use(undefined);
  const secrets = requireSecrets(ctx, path);
  const ref = await secrets.put(tenantId, value);
  try {
    return await use(ref);
  } catch (error) {
    // Nothing refers to the secret: the transaction that would have stored its reference rolled back.
    await secrets.delete?.(ref).catch(() => undefined);
    throw error;
  }
}

async function conflictOnTaken(tx: SqlExecutor, input: NewMachineInput, macs: string[], address: string) {
  const taken = await tx.query<{ mac: string }>('SELECT mac FROM metal_macs WHERE mac = ANY($1::text[])', [macs]);
  const first = taken.rows[0];
  if (first) {
    throw new ComputeError('CONFLICT', `MAC ${first.mac} belongs to another machine`, {
      details: { path: ['macs', macs.indexOf(first.mac)] },
    });
  }
  const bmc = await tx.query(
    'SELECT 1 FROM metal_machines WHERE site_id = $1 AND bmc_address = $2 AND retired_at IS NULL',
    [input.siteId, address],
  );
  if (bmc.rowCount > 0) {
    throw new ComputeError('CONFLICT', `BMC ${address} belongs to another machine of site ${input.siteId}`, {
      details: { path: ['bmc', 'address'] },
    });
  }
}

/**
 * Creates the node and its machine row and carries out the enroll or adopt move, in one transaction. Input is checked
 * before anything is written (and before the BMC credential is stored).
 */
async function createMachine(
  ctx: ApiCallContext,
  profiles: PhaseProfiles,
  input: NewMachineInput,
  verb: 'enroll' | 'adopt',
  options: RequestOptions,
): Promise<MachineView> {
  const address = checkBmcAddress(checkStorable(input.bmc.address, ['bmc', 'address']), ['bmc', 'address']);
  const macs = checkMacs(input.macs, ['macs']);
  const labels = validateLabels(input.labels ?? {}, ['labels'], 'INVALID_INPUT');
  for (const key of ['name', 'pool'] as const) {
    const value = input[key];
    if (value !== undefined) checkStorable(value, [key]);
  }
  const { username, password } = input.bmc;
  if ((username === undefined) !== (password === undefined)) {
    const missing = username === undefined ? 'username' : 'password';
    throw invalidInput(`bmc.${missing} is required with bmc.${missing === 'username' ? 'password' : 'username'}`, [
      'bmc',
      missing,
    ]);
  }
  if (username !== undefined) checkStorable(username, ['bmc', 'username']);
  if (password !== undefined) checkStorable(password, ['bmc', 'password']);
  const move = decideRequest(undefined, verb, options);
  const credential = username === undefined ? undefined : JSON.stringify({ username, password });
  return withSecret(ctx, input.tenantId, credential, ['bmc', 'password'], async (credentialRef) => {
    try {
      return await ctx.sql.transaction(async (tx) => {
        await conflictOnTaken(tx, input, macs, address);
        const now = ctx.clock.now();
        const node = await createNode(
          tx,
          {
            tenantId: input.tenantId,
            kind: 'machine',
            siteId: input.siteId,
            ...(input.pool === undefined ? {} : { poolId: input.pool }),
            ...(input.name === undefined ? {} : { name: input.name }),
            labels,
          },
          now,
        );
        await tx.query(
          `INSERT INTO metal_machines (node_id, tenant_id, site_id, pool, bmc_address, bmc_driver, bmc_credential_ref,
             created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $8)`,
          [
            node.id,
            input.tenantId,
            input.siteId,
            input.pool ?? null,
            address,
            input.bmc.driver,
            credentialRef === undefined ? null : JSON.stringify(credentialRef),
            now,
          ],
        );
        await tx.query('INSERT INTO metal_macs (mac, node_id) SELECT unnest($1::text[]), $2', [macs, node.id]);
        await applyMove(tx, ctx, profiles, { nodeId: node.id, tenantId: input.tenantId, deployRequest: null }, move);
        const machine = await readMachine(tx, node.id);
        return machineView(tx, machine!, ctx.quorum);
      });
    } catch (error) {
      // Another enroll took a MAC or the BMC between the check and the insert.
      if (isSqlError(error, 'unique-violation')) {
        throw new ComputeError('CONFLICT', 'a MAC or the BMC belongs to another machine', {
          details: { path: ['macs'] },
        });
      }
      throw error;
    }
  });
}

type VerbInput = { tenantId: string; nodeId: string };

/** Decides a verb on the locked machine and carries it out; `prepare` may check more or add to the move. */
async function moveMachine(
  ctx: ApiCallContext,
  profiles: PhaseProfiles,
  input: VerbInput,
  verb: Exclude<LifecycleVerb, 'enroll' | 'adopt'>,
  extras: { deployRequest?: DeployRequest } = {},
): Promise<MachineView> {
  return ctx.sql.transaction(async (tx) => {
    const machine = await readMachine(tx, input.nodeId, { tenantId: input.tenantId, forUpdate: true });
    if (!machine) throw machineNotFound();
    const move = decideRequest(snapshotOf(machine), verb);
    await applyMove(tx, ctx, profiles, machine, move, extras);
    return machineView(tx, (await readMachine(tx, input.nodeId))!, ctx.quorum);
  });
}

/** The SQL condition of one `when` term on the node's labels (`n.labels`), its values bound as parameters. */
function termSql(term: WhenTerm, bind: (value: string) => string): string {
  const value = `(n.labels ->> ${bind(term.key)})`;
  switch (term.kind) {
    case 'present':
      return `(${value} IS NOT NULL AND ${value} <> 'false')`;
    case 'absent':
      return `(${value} IS NULL OR ${value} = 'false')`;
    case 'equals':
      return `(${value} = ${bind(term.value)})`;
    case 'notEquals':
      return `(${value} IS DISTINCT FROM ${bind(term.value)})`;
  }
}

function parseSelector(selector: string): readonly WhenTerm[] {
  try {
    const { terms } = parseWhen(selector, ['selector']);
    if (terms.length === 0) throw invalidInput('selector has no terms', ['selector']);
    return terms;
  } catch (error) {
    if (error instanceof ComputeError && error.code === 'INVALID_CONFIG') {
      throw new ComputeError('INVALID_INPUT', error.message, { details: { ...error.details, path: ['selector'] } });
    }
    throw error;
  }
}

/**
 * The `metal` API group (item 6 of the metal issue): every method but `enroll`, `adopt` and `list` is decided on the
 * node (`compute-node`), `enroll` and `adopt` on the site (`compute-site`), `list` on the tenant; reads need
 * `compute:metal:read`, everything else `compute:metal:manage`. Another tenant's node or site, and a node that is not
 * a metal machine, are NOT_FOUND. An illegal move is INVALID_STATE naming the machine's state.
 *
 * @example
 * ```ts
 * const api = compute.api as unknown as ApiClient<{ metal: MetalApi }>;
 * const machine = await api.metal.enroll(token, { tenantId: 'acme', siteId, bmc: { address: '10.0.0.7', driver: 'redfish' }, macs: ['0c:42:a1:00:00:01'] });
 * ```
 */
export function metalApi(profiles: PhaseProfiles) {
  const enroll = defineApiMethod({
    input: v.object({
      ...newMachineInput,
      holdAfter: v.optional(v.picklist(['enrolling', 'inspecting'], "holdAfter must be 'enrolling' or 'inspecting'")),
    }),
    permission: 'compute:metal:manage',
    resource: onSite,
    description:
      'Enrolls a machine of a site (its BMC, MACs, labels and pool): enrolling, then inspecting and commissioning to ' +
      'available, unless holdAfter stops it after enrolling or inspecting. BMC credentials are stored through ' +
      'ctx.secrets; a MAC or BMC already enrolled is CONFLICT.',
    handler: (input, ctx) =>
      createMachine(
        ctx,
        profiles,
        input,
        'enroll',
        input.holdAfter === undefined ? {} : { holdAfter: input.holdAfter },
      ),
  });

  const adopt = defineApiMethod({
    input: v.object(newMachineInput),
    permission: 'compute:metal:manage',
    resource: onSite,
    description: 'Takes over a running machine (no image, user data or disk writes): adopting, then deployed.',
    handler: (input, ctx) => createMachine(ctx, profiles, input, 'adopt', {}),
  });

  const get = defineApiMethod({
    input: v.object(nodeInput),
    permission: 'compute:metal:read',
    resource: onNode,
    description:
      'A machine: its state (and whether it is held), facts, labels, BMC (never its credential), MACs, active ' +
      'workflow with its step in flight, the batch it awaits (approvals of threshold), and last error.',
    handler: async (input, ctx): Promise<MachineView> => {
      const machine = await readMachine(ctx.sql, input.nodeId, { tenantId: input.tenantId });
      if (!machine) throw machineNotFound();
      return machineView(ctx.sql, machine, ctx.quorum);
    },
  });

  const list = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      state: v.optional(v.picklist(NODE_STATES as string[], `state must be one of ${NODE_STATES.join(', ')}`)),
      siteId: v.optional(textSchema('siteId')),
      pool: v.optional(textSchema('pool', 128)),
      selector: v.optional(textSchema('selector', 4096)),
      limit: v.optional(
        v.pipe(
          v.number('limit must be a number'),
          v.integer('limit must be a whole number'),
          v.minValue(1, 'limit must be at least 1'),
          v.maxValue(METAL_MAX_LIMIT, `limit must be at most ${METAL_MAX_LIMIT}`),
        ),
        METAL_DEFAULT_LIMIT,
      ),
      cursor: v.optional(v.pipe(v.string('cursor must be a string'), v.minLength(1), v.maxLength(2048))),
    }),
    permission: 'compute:metal:read',
    resource: (input, ctx) => resolveTenantResource(ctx.sql, input.tenantId),
    description:
      'A tenant’s machines, newest first, filtered by state, site, pool and a label selector in the when grammar ' +
      '(`nvswitch && gpu.model=H100`); limit at most 100 (default 50); nextCursor fetches the next page.',
    handler: async (input, ctx): Promise<{ items: MachineSummary[]; nextCursor: string | null }> => {
      const params: unknown[] = [input.tenantId, ACTIVE_STATES_PARAM];
      const bind = (value: unknown) => {
        params.push(value);
        return `$${params.length}`;
      };
      const where = ['m.tenant_id = $1'];
      for (const [key, value] of [
        ['siteId', input.siteId],
        ['pool', input.pool],
        ['selector', input.selector],
      ] as const) {
        if (value !== undefined) checkStorable(value, [key]);
      }
      if (input.state !== undefined) where.push(`n.provision_state = ${bind(input.state)}`);
      if (input.siteId !== undefined) where.push(`m.site_id = ${bind(input.siteId)}`);
      if (input.pool !== undefined) where.push(`m.pool = ${bind(input.pool)}`);
      if (input.selector !== undefined) {
        for (const term of parseSelector(input.selector)) where.push(termSql(term, bind));
      }
      if (input.cursor !== undefined) {
        const after = decodeMachineCursor(input.cursor);
        const at = bind(after.createdKey);
        const id = bind(after.nodeId);
        where.push(
          `(m.created_at < ${at}::timestamptz OR (m.created_at = ${at}::timestamptz AND m.node_id COLLATE "C" < ${id}::text COLLATE "C"))`,
        );
      }
      const limit = bind(input.limit + 1);
      const { rows } = await ctx.sql.query<Record<string, unknown>>(
        `SELECT ${MACHINE_COLUMNS}, aw.*,
           to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key
         FROM ${MACHINE_FROM} ${ACTIVE_WORKFLOW_LATERAL('$2')}
         WHERE ${where.join(' AND ')}
         ORDER BY m.created_at DESC, m.node_id COLLATE "C" DESC
         LIMIT ${limit}`,
        params,
      );
      const page = rows.slice(0, input.limit);
      const last = page[page.length - 1];
      return {
        items: await Promise.all(
          page.map(async (r) => {
            const workflow = workflowOf(r);
            return toSummary(toMachineRecord(r), workflow, await machineAwaiting(ctx.sql, ctx.quorum, workflow));
          }),
        ),
        nextCursor:
          rows.length > input.limit && last
            ? encodeMachineCursor({ createdKey: last.created_key as string, nodeId: last.node_id as string })
            : null,
      };
    },
  });

  const verb = (name: 'inspect' | 'commission' | 'release' | 'retire' | 'recover', description: string) =>
    defineApiMethod({
      input: v.object(nodeInput),
      permission: 'compute:metal:manage',
      resource: onNode,
      description,
      handler: (input, ctx) => moveMachine(ctx, profiles, input, name),
    });

  const deploy = defineApiMethod({
    input: v.object({
      ...nodeInput,
      profileId: textSchema('profileId', 128),
      profileVersion: v.optional(
        v.pipe(
          v.number('profileVersion must be a number'),
          v.integer('profileVersion must be a whole number'),
          v.minValue(1, 'profileVersion must be at least 1'),
          v.maxValue(2_147_483_647, 'profileVersion must be at most 2147483647'),
        ),
      ),
      image: v.optional(
        v.pipe(
          textSchema('image', 512),
          v.regex(/^[^@\s]+@[^@\s]+$/, "image must be 'name@version' from the image catalog"),
        ),
      ),
      userData: v.optional(
        v.pipe(v.string('userData must be a string'), v.maxLength(MAX_USER_DATA, 'userData is at most 1 MiB')),
      ),
    }),
    permission: 'compute:metal:manage',
    resource: onNode,
    description:
      'Deploys an available machine with a profile (the latest version the tenant sees, or profileVersion), an image ' +
      "(it wins over the profile's) and user data (stored through ctx.secrets, never kept in a table; it wins over " +
      "the profile's rendered user data): deploying, then deployed.",
    handler: async (input, ctx) => {
      checkStorable(input.profileId, ['profileId']);
      if (input.image !== undefined) checkStorable(input.image, ['image']);
      if (input.userData !== undefined) checkStorable(input.userData, ['userData']);
      return withSecret(ctx, input.tenantId, input.userData, ['userData'], (userDataRef) =>
        moveMachine(ctx, profiles, input, 'deploy', {
          deployRequest: {
            profileId: input.profileId,
            ...(input.profileVersion === undefined ? {} : { profileVersion: input.profileVersion }),
            ...(input.image === undefined ? {} : { image: input.image }),
            ...(userDataRef === undefined ? {} : { userDataRef }),
          },
        }),
      );
    },
  });

  const abort = defineApiMethod({
    input: v.object({
      ...nodeInput,
      reason: v.optional(
        v.pipe(v.string('reason must be a string'), v.maxLength(1024, 'reason must be at most 1024 characters')),
      ),
    }),
    permission: 'compute:metal:manage',
    resource: onNode,
    description:
      'Aborts the machine’s active workflow (its cleanup still runs) and fails the machine at once, keeping the ' +
      'phase for recover. A machine without an active workflow is INVALID_STATE.',
    handler: async (input, ctx): Promise<MachineView> => {
      if (input.reason !== undefined) checkStorable(input.reason, ['reason']);
      let secretsLeft: string[] = [];
      const view = await ctx.sql.transaction(async (tx) => {
        secretsLeft = [];
        const machine = await readMachine(tx, input.nodeId, { tenantId: input.tenantId, forUpdate: true });
        if (!machine) throw machineNotFound();
        const move = decideRequest(snapshotOf(machine), 'abort');
        const active =
          machine.workflowId === null
            ? undefined
            : (
                await tx.query<{ id: string }>('SELECT id FROM workflows WHERE id = $1 AND state = ANY($2::text[])', [
                  machine.workflowId,
                  ACTIVE_STATES_PARAM,
                ])
              ).rows[0];
        if (!active) {
          throw new ComputeError(
            'INVALID_STATE',
            `machine in state '${machine.state}' has no active workflow to abort`,
            {
              details: { reason: 'illegal-move', state: machine.state, verb: 'abort' },
            },
          );
        }
        if (!ctx.workflows) {
          throw new ComputeError('INVALID_CONFIG', 'metal needs ctx.workflows: install provisionModule with metal', {
            details: { path: ['workflows'] },
          });
        }
        const reason = input.reason ?? 'aborted by metal.abort';
        await ctx.workflows.abort(tx, { workflowId: active.id, reason });
        // The machine no longer names the workflow once failed, so its end moves nothing: the boot entries' secrets
        // its ramdisk step held go now, since that step will not delete them.
        secretsLeft = await forgetBootEntrySecrets(tx, ctx, active.id);
        await applyMove(tx, ctx, profiles, machine, move, {
          lastError: { code: 'ABORTED', message: reason, workflowId: active.id, phase: machine.phase },
        });
        return machineView(tx, (await readMachine(tx, input.nodeId))!, ctx.quorum);
      });
      await forgetSecretsAfterCommit(ctx, secretsLeft);
      return view;
    },
  });

  const setLabels = defineApiMethod({
    input: v.object({ ...nodeInput, labels: labelsSchema }),
    permission: 'compute:metal:manage',
    resource: onNode,
    description:
      'Replaces the machine’s labels (an inspection sets the hardware ones again when it runs). Allowed in every state.',
    handler: async (input, ctx): Promise<MachineView> => {
      const labels = validateLabels(input.labels, ['labels'], 'INVALID_INPUT');
      return ctx.sql.transaction(async (tx) => {
        const machine = await readMachine(tx, input.nodeId, { tenantId: input.tenantId, forUpdate: true });
        if (!machine) throw machineNotFound();
        await setNodeLabels(tx, machine.nodeId, labels, ctx.clock.now());
        await ctx.events.publish(tx, {
          tenantId: machine.tenantId,
          subject: `node/${machine.nodeId}`,
          type: 'metal.node.labelled',
          data: { nodeId: machine.nodeId, labels: { ...labels } },
        });
        return machineView(tx, (await readMachine(tx, input.nodeId))!, ctx.quorum);
      });
    },
  });

  return defineApiGroup('metal', {
    enroll,
    adopt,
    get,
    list,
    inspect: verb(
      'inspect',
      'Inspects an available machine again (back to available), or continues an enroll held after enrolling.',
    ),
    commission: verb(
      'commission',
      'Commissions an available machine again (back to available), or continues an enroll held after inspecting.',
    ),
    deploy,
    release: verb('release', 'Releases a deployed machine: its disks are wiped, then it is available.'),
    retire: verb('retire', 'Retires an available, failed or held machine: retiring, then retired (its MACs freed).'),
    abort,
    recover: verb(
      'recover',
      'Runs the phase a failed machine failed in again through a fresh workflow (or a fresh inspect back to ' +
        'available when that phase is unknown).',
    ),
    setLabels,
  });
}

/** The `metal` group {@link metalApi} returns, for `ApiClient<{ metal: MetalApi }>`. */
export type MetalApi = ReturnType<typeof metalApi>;
