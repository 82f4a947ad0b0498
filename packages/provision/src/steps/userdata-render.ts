import { ComputeError, type IssueJoinTokenInput, manifest, type SqlExecutor } from '@better-compute/core';
import type { CommitChange } from '@better-compute/core/kernel';
import { defineStep } from '../define/define-step';
import type { StepContext } from '../define/types';
import {
  type CheckedUserDataOptions,
  checkUserDataOptions,
  resolveUserDataTemplate,
  type UserDataOptions,
} from '../user-data/options';
import { renderTemplate, type UserDataValues } from '../user-data/render-template';
import { type RenderedUserData, USERDATA_RENDER_STEP_ID } from '../user-data/rendered-user-data';

/**
 * The lifetime of the join token `userdata.render` mints when the profile sets no `tokenTtlSeconds`: 2 hours.
 *
 * @example
 * ```ts
 * DEFAULT_USER_DATA_TOKEN_TTL_SECONDS; // 7200
 * ```
 */
export const DEFAULT_USER_DATA_TOKEN_TTL_SECONDS = 7200;

// What the first render runs with, before anything is minted, so a bad value or a missing variable costs no token.
const PROBE_TOKEN = `tok_${'0'.repeat(26)}.${'A'.repeat(43)}`;

function missingPort(name: 'pki' | 'secrets'): ComputeError {
  return new ComputeError(
    'INVALID_CONFIG',
    `userdata.render needs ctx.${name}: pass ${name} to betterCompute (see the pki package)`,
    { details: { path: [name] } },
  );
}

async function findRender(sql: SqlExecutor, stepKey: string): Promise<RenderedUserData | undefined> {
  const { rows } = await sql.query<{ user_data_ref: string; kind: string; join_token_id: string }>(
    'SELECT user_data_ref, kind, join_token_id FROM userdata_renders WHERE step_key = $1',
    [stepKey],
  );
  const row = rows[0];
  return row ? { userDataRef: row.user_data_ref, kind: row.kind, joinTokenId: row.join_token_id } : undefined;
}

/**
 * The `userdata_renders` key of one run of the step: its idempotency key on the first attempt, `#<attempt>` after it
 * (as agent steps key their command). A crashed run is re-run under the same attempt and finds its render; a retry
 * (`retries`, or `retryWorkflow` from this step) is a new attempt and mints a fresh token, since the first one may be
 * spent or expired by then.
 *
 * @example
 * ```ts
 * userDataRenderKey({ idempotencyKey: 'wf:wf_1:main.1', attempt: 1 }); // 'wf:wf_1:main.1#1'
 * ```
 */
export function userDataRenderKey(ctx: Pick<StepContext, 'idempotencyKey' | 'attempt'>): string {
  return ctx.attempt === 0 ? ctx.idempotencyKey : `${ctx.idempotencyKey}#${ctx.attempt}`;
}

async function render(ctx: StepContext, options: CheckedUserDataOptions): Promise<RenderedUserData> {
  const { pki, secrets, node } = ctx;
  if (!pki) throw missingPort('pki');
  if (!secrets) throw missingPort('secrets');
  if (!node) {
    throw new ComputeError('INVALID_CONFIG', 'userdata.render renders user data for a node; this workflow has none', {
      details: { path: ['nodeId'] },
    });
  }
  const stepKey = userDataRenderKey(ctx);
  const stage = stagedRender(ctx);
  // Find before create, when the token and document are written before the result: a re-run after a crash returns
  // the first run's. Staged with the result instead, they exist only once the step succeeded, and it runs no more.
  if (!stage) {
    const done = await findRender(ctx.sql, stepKey);
    if (done) return done;
  }

  const profile = ctx.workflow.profile;
  const userData = profile.userData;
  if (!userData) {
    throw new ComputeError('INVALID_CONFIG', `profile ${profile.id} has no userData to render`, {
      details: { path: ['userData'] },
    });
  }
  const template = resolveUserDataTemplate(options, userData);
  // Options left unset stay out: a template that uses them fails INVALID_CONFIG naming the variable.
  const values: UserDataValues = {
    nodeId: node.id,
    hostname: node.id.replace(/_/g, '-'),
    controlPlaneUrl: options.controlPlaneUrl,
    bcdUrl: options.bcdUrl,
    bcdSha256: options.bcdSha256,
  };
  renderTemplate(template, { ...values, joinToken: PROBE_TOKEN });

  const tokenInput: IssueJoinTokenInput = {
    tenantId: ctx.tenantId,
    role: 'provisioned',
    nodeId: node.id,
    ...(node.siteId ? { siteId: node.siteId } : {}),
    ...(node.poolId ? { poolId: node.poolId } : {}),
    ttlSeconds: profile.tokenTtlSeconds ?? DEFAULT_USER_DATA_TOKEN_TTL_SECONDS,
    maxUses: 1,
  };
  if (stage) {
    const rendered = stage(tokenInput, stepKey, userData.kind, (token) =>
      renderTemplate(template, { ...values, joinToken: token }),
    );
    logRendered(ctx, node.id, rendered);
    return rendered;
  }
  const minted = await ctx.sql.transaction((tx) => pki.issueJoinToken(tx, tokenInput));
  const document = renderTemplate(template, { ...values, joinToken: minted.token });
  const userDataRef = await secrets.put(ctx.tenantId, document);
  const rendered = { userDataRef, kind: userData.kind, joinTokenId: minted.id };
  const stored = await ctx.sql.transaction(async (tx) => {
    await tx.query(INSERT_RENDER, renderRow(ctx, stepKey, rendered));
    return findRender(tx, stepKey);
  });
  if (!stored) throw new ComputeError('INTERNAL', 'the user-data render was not recorded');
  // Another run of the same step recorded first: its render stands, this document is dropped.
  if (stored.userDataRef !== userDataRef) await secrets.delete?.(userDataRef);
  logRendered(ctx, node.id, stored);
  return stored;
}

const RENDER_COLUMNS = 'step_key, workflow_id, tenant_id, kind, user_data_ref, join_token_id, created_at';
const INSERT_RENDER = `INSERT INTO userdata_renders (${RENDER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
  ON CONFLICT (step_key) DO NOTHING`;

function renderRow(ctx: StepContext, stepKey: string, rendered: RenderedUserData): unknown[] {
  const { userDataRef, kind, joinTokenId } = rendered;
  return [stepKey, ctx.workflowId, ctx.tenantId, kind, userDataRef, joinTokenId, ctx.clock.now()];
}

function logRendered(ctx: StepContext, nodeId: string, rendered: RenderedUserData): void {
  ctx.log.info('user data rendered', {
    workflowId: ctx.workflowId,
    stepId: ctx.stepId,
    nodeId,
    kind: rendered.kind,
    userDataRef: rendered.userDataRef,
    joinTokenId: rendered.joinTokenId,
  });
}

/**
 * The render written with the step's result, when the ports can stage it (pki's `stageJoinToken`, the broker's
 * `stagePut`) and the run can write with its result: the token, the document and the render's record are then
 * written by the statement that settles the step (or all in one transaction), so a run that does not succeed leaves
 * no token or document behind. Undefined otherwise.
 */
function stagedRender(ctx: StepContext) {
  const stageToken = ctx.pki?.stageJoinToken?.bind(ctx.pki);
  const stagePut = ctx.secrets?.stagePut?.bind(ctx.secrets);
  const writeWithResult = ctx.writeWithResult?.bind(ctx);
  if (!stageToken || !stagePut || !writeWithResult) return undefined;
  return (
    tokenInput: IssueJoinTokenInput,
    stepKey: string,
    kind: string,
    documentFor: (token: string) => string,
  ): RenderedUserData => {
    const minted = stageToken(tokenInput);
    const put = stagePut(ctx.tenantId, documentFor(minted.token));
    const rendered = { userDataRef: put.ref, kind, joinTokenId: minted.id };
    const row = renderRow(ctx, stepKey, rendered);
    // A record under the same key can only be a run's that wrote before its result (a worker without staging ports):
    // it stays, and this result is the step's.
    const record: CommitChange = {
      name: 'userdata_render',
      sql: ({ bind, guard }) =>
        `INSERT INTO userdata_renders (${RENDER_COLUMNS})
         SELECT ${row.map((value, i) => `${bind(value)}${RENDER_CASTS[i]}`).join(', ')} WHERE ${guard}
         ON CONFLICT (step_key) DO NOTHING`,
    };
    writeWithResult({
      changes: [...minted.write.changes, ...put.write.changes, record],
      // A join token, a secret and the render's record: nothing the engine or a module's preload reads.
      leaves: {},
      async write(tx) {
        await minted.write.write(tx);
        await put.write.write(tx);
        await tx.query(INSERT_RENDER, row);
      },
    });
    return rendered;
  };
}

// The column types of a render's row, for its values bound in a commit's statement.
const RENDER_CASTS = ['::text', '::text', '::text', '::text', '::text', '::text', '::timestamptz'];

/**
 * Makes the `userdata.render` step with the module's user-data options (provision registers it as its own): renders
 * the pinned profile's `userData: { kind, template }` for the workflow's node with a fresh single-use `provisioned`
 * join token bound to the node (`tokenTtlSeconds`, default 7200), stores the document with `ctx.secrets.put` and
 * returns only `{ userDataRef, kind, joinTokenId }`. Missing `ctx.pki` or `ctx.secrets`, a profile without user
 * data, and a template that does not resolve are INVALID_CONFIG; a node id with a line break is INVALID_INPUT. Values
 * are checked by a first render before anything is minted. With ports that can stage them (pki's) the token, the
 * document and the render's record in `userdata_renders` are written by the statement that records the step
 * succeeded: a run that crashed or failed leaves none of them, and its re-run renders anew. Otherwise they are written
 * before the result, find-before-create by {@link userDataRenderKey}, so a run re-run after a crash returns the first
 * run's result.
 *
 * @example
 * ```ts
 * const render = userDataRenderStep({ controlPlaneUrl, bcdUrl, bcdSha256 });
 * const profile = defineProfile({ id: 'fcos', version: 1, target: 'metal', userData: { kind: 'ignition' }, steps: [{ use: 'userdata.render' }] });
 * ```
 */
export function userDataRenderStep(options?: UserDataOptions) {
  const checked = checkUserDataOptions(options);
  return defineStep({
    id: USERDATA_RENDER_STEP_ID,
    runsOn: 'control-plane',
    timeout: '2m',
    retrySafe: true,
    input: manifest({}),
    description: "Renders the profile's user data with a fresh single-use join token and stores it as a secret.",
    run: (_input, ctx): Promise<RenderedUserData> => render(ctx, checked),
  });
}
