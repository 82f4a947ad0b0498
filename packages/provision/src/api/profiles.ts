import {
  type ApiCallContext,
  ComputeError,
  type ComputeErrorCode,
  type ComputeErrorIssue,
  defineApiGroup,
  defineApiMethod,
  type ErrorPath,
  evaluateWhen,
  isComputeError,
  type Json,
  type Labels,
  type ModuleContext,
  ROOT_TENANT_ID,
  resolveTenantResource,
  resourceNotFound,
  type SqlExecutor,
} from '@better-compute/core';
import { getNode } from '@better-compute/core/nodes';
import * as v from 'valibot';
import { checkProfile } from '../define/define-profile';
import type { Profile, StepRunsOn } from '../define/types';
import type { StepPhase } from '../engine/constants';
import { type ExpandedStep, expandProfile } from '../engine/expand';
import type { Engine } from '../engine/start-workflow';
import { BUILTIN_TENANT, findProfile, storeProfile } from '../profiles/profile-store';
import { cursorSchema, decodeCursor, encodeCursor, limitSchema, type Page } from './pages';
import { iso, textSchema, versionSchema } from './schemas';

/** A profile as `profiles.get` and `profiles.create` return it: the document, where it lives, and whether it is used. */
export interface ApiProfile {
  /** The owning tenant, or `builtin` for a shipped profile. */
  tenantId: string;
  public: boolean;
  /** A workflow used this version, so it is immutable. Shipped profiles are read-only and report `false`. */
  used: boolean;
  profile: Profile;
}

/** One entry of `profiles.list`: a profile version the tenant can use, without its steps. */
export interface ApiProfileSummary {
  /** The owning tenant, or `builtin` for a shipped profile. */
  tenantId: string;
  id: string;
  version: number;
  public: boolean;
  used: boolean;
  /**
   * A lookup of this id and version finds another entry first (the tenant's own before a public one, a public one
   * before a shipped one), listed just before this one.
   */
  shadowed: boolean;
  target: 'metal' | 'instance';
  mode: 'provision' | 'adopt';
  role: string | null;
  description: string | null;
  /** When it was stored; `null` for a shipped profile. */
  createdAt: string | null;
  updatedAt: string | null;
}

/** One problem of a profile, with its path in the profile document (`['steps', 2, 'with', 'port']`). */
export interface ProfileIssue {
  path: ErrorPath;
  message: string;
  code: ComputeErrorCode;
}

/** What `profiles.validate` answers: whether the profile resolves, and every issue when it does not. */
export interface ProfileValidation {
  valid: boolean;
  issues: ProfileIssue[];
}

/** One row of the plan `profiles.render` returns, in run order. */
export interface RenderedStep {
  /** `main.3`, `main.3.on-failure`, `main.3.cleanup.1`, `cleanup.1`. */
  stepId: string;
  phase: StepPhase;
  /** The main step an on-failure or a definition's cleanup step belongs to. */
  parentStepId: string | null;
  name: string | null;
  /** What `use` (or `fallback`) resolved to. */
  action: string;
  resolution: 'step' | 'driver';
  runsOn: StepRunsOn;
  /**
   * The agent the profile step names with `on:` (`site`, `node`, `ramdisk`): where an agent step runs, and where a
   * relaying step (which `runsOn` the control plane) sends its command. `null` when the step names none.
   */
  on: StepRunsOn | null;
  /** The command kind an agent step or a driver operation sends; `null` for a control-plane step. */
  commandKind: string | null;
  timeoutMs: number;
  retries: number;
  onFailure: 'fail' | 'continue' | 'rescue' | 'step';
  await: 'rejoin' | null;
  when: string | null;
  with: { readonly [key: string]: Json };
  /** A driver operation's binding from the profile's `drivers`; `null` for a registered step. */
  driver: Json | null;
  /**
   * With a node: whether the step's `when` holds on the node's labels (and, for an on-failure or a definition's cleanup
   * step, whether its main step will run). `null` without a node.
   */
  willRun: boolean | null;
}

/** What `profiles.render` returns: the profile it expanded, the node it evaluated against, and the steps. */
export interface ProfileRendering {
  /** Where the profile came from: its tenant or `builtin`, or `null` for a document passed inline. */
  tenantId: string | null;
  profileId: string;
  version: number;
  nodeId: string | null;
  /** Every command kind the workflow can send (what its destructive batch would be scoped to). */
  commandKinds: string[];
  steps: RenderedStep[];
}

const PROFILES_LISTING = 'profiles';

const tenantInput = { tenantId: textSchema('tenantId') };

const onTenant = (input: { tenantId: string }, ctx: ModuleContext) => resolveTenantResource(ctx.sql, input.tenantId);

// `profile` (a document) or `profileId` (with an optional `version`), exactly one of them.
const profileChoice = {
  profile: v.optional(v.unknown()),
  profileId: v.optional(textSchema('profileId')),
  version: v.optional(versionSchema),
};

const ONE_PROFILE = 'give either profile (a document) or profileId (with an optional version)';

function oneProfile(input: { profile?: unknown; profileId?: string; version?: number }): boolean {
  return (
    (input.profile === undefined) !== (input.profileId === undefined) &&
    (input.version === undefined || input.profileId !== undefined)
  );
}

const validateInputSchema = v.pipe(
  v.object({ ...tenantInput, ...profileChoice }),
  v.forward(v.partialCheck([['profile'], ['profileId'], ['version']], oneProfile, ONE_PROFILE), ['profileId']),
);

const renderInputSchema = v.pipe(
  v.object({ ...tenantInput, ...profileChoice, nodeId: v.optional(textSchema('nodeId')) }),
  v.forward(v.partialCheck([['profile'], ['profileId'], ['version']], oneProfile, ONE_PROFILE), ['profileId']),
);

/** Finds the profile a call names: a document passed inline (checked), or the one the tenant sees. */
async function loadProfile(
  sql: SqlExecutor,
  engine: Engine,
  input: { tenantId: string; profile?: unknown; profileId?: string; version?: number },
): Promise<{ profile: Profile; tenantId: string | null }> {
  if (input.profileId === undefined) return { profile: checkProfile(input.profile, 'INVALID_INPUT'), tenantId: null };
  const found = await findProfile(sql, engine.profiles, input.tenantId, input.profileId, input.version);
  if (!found) throw await profileNotFound(sql, engine, input.tenantId, input.profileId, input.version);
  return { profile: found.profile, tenantId: found.tenantId };
}

/** NOT_FOUND at `version` when the id exists in another version, else at `profileId`. */
async function profileNotFound(
  sql: SqlExecutor,
  engine: Engine,
  tenantId: string,
  profileId: string,
  version: number | undefined,
): Promise<ComputeError> {
  const idExists =
    version !== undefined && (await findProfile(sql, engine.profiles, tenantId, profileId)) !== undefined;
  const suffix = version === undefined ? '' : ` version ${version}`;
  return new ComputeError('NOT_FOUND', `profile ${profileId}${suffix} not found`, {
    details: { path: [idExists ? 'version' : 'profileId'] },
  });
}

function issuesOf(error: ComputeError): ProfileIssue[] {
  const listed: readonly ComputeErrorIssue[] = error.details.issues ?? [
    { path: error.details.path ?? [], message: error.message },
  ];
  return listed.map((issue) => ({ path: issue.path, message: issue.message, code: issue.code ?? error.code }));
}

/**
 * Expands a profile exactly as `workflows.start` does: against this worker's steps, command kinds and config units, so
 * what validate and render report is what starting a workflow would refuse.
 */
async function expand(profile: Profile, engine: Engine, ctx: ApiCallContext) {
  return expandProfile(profile, {
    steps: engine.steps,
    commandKinds: ctx.commandKinds,
    configUnits: engine.configUnits,
  });
}

function withIssues(error: unknown): unknown {
  if (!isComputeError(error, 'INVALID_INPUT') || error.details.issues !== undefined) return error;
  return new ComputeError('INVALID_INPUT', error.message, {
    details: { ...error.details, issues: issuesOf(error) },
    cause: error,
  });
}

async function nodeLabels(sql: SqlExecutor, tenantId: string, nodeId: string): Promise<Labels> {
  const node = await getNode(sql, nodeId, { tenantId });
  if (!node) throw resourceNotFound('compute-node', ['nodeId']);
  return node.labels ?? {};
}

function renderSteps(profile: Profile, steps: readonly ExpandedStep[], labels: Labels | undefined): RenderedStep[] {
  const runs = new Map<string, boolean>();
  return steps.map((step) => {
    let willRun: boolean | null = null;
    if (labels !== undefined) {
      const holds = step.spec.when === undefined || evaluateWhen(step.spec.when, labels);
      willRun = holds && (step.parentStepId === null || runs.get(step.parentStepId) !== false);
      runs.set(step.stepId, willRun);
    }
    const concern = step.action.split('.')[0] as string;
    return {
      stepId: step.stepId,
      phase: step.phase,
      parentStepId: step.parentStepId,
      name: step.spec.name ?? null,
      action: step.action,
      resolution: step.resolution,
      runsOn: step.runsOn,
      on: step.spec.on ?? null,
      commandKind: step.commandKind,
      timeoutMs: step.timeoutMs,
      retries: step.retries,
      onFailure: step.onFailure,
      await: step.awaitRejoin ? 'rejoin' : null,
      when: step.spec.when ?? null,
      with: step.spec.with ?? {},
      driver: step.resolution === 'driver' ? (profile.drivers?.[concern] ?? null) : null,
      willRun,
    };
  });
}

// A listing entry and its place in the order: id, then the newest version first, then the tenant's own (0) before
// public ones (1) before shipped ones (2), then the owning tenant. The first entry of an (id, version) is the one
// `findProfile` picks for that pinned version.
interface Entry {
  item: ApiProfileSummary;
  key: [id: string, version: number, rank: number, tenantId: string];
}

function compareKeys(a: Entry['key'], b: Entry['key']): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  if (a[1] !== b[1]) return b[1] - a[1];
  if (a[2] !== b[2]) return a[2] - b[2];
  if (a[3] !== b[3]) return a[3] < b[3] ? -1 : 1;
  return 0;
}

// Ids and tenants compare bytewise (COLLATE "C"), as JavaScript compares the ASCII ids of shipped profiles.
const LIST_STORED = `
SELECT * FROM (
  SELECT tenant_id, id, version, public, used_at IS NOT NULL AS used, created_at, updated_at,
    document->>'target' AS target, document->>'mode' AS mode, document->>'role' AS role,
    document->>'description' AS description, CASE WHEN tenant_id = $1 THEN 0 ELSE 1 END AS rank
  FROM profiles WHERE tenant_id = $1 OR public
) p
WHERE $2::text IS NULL
  OR (p.id COLLATE "C", -p.version, p.rank, p.tenant_id COLLATE "C")
     > ($2::text COLLATE "C", $3::int, $4::int, $5::text COLLATE "C")
ORDER BY p.id COLLATE "C", p.version DESC, p.rank, p.tenant_id COLLATE "C"
LIMIT $6`;

function summaryOf(
  r: Pick<ApiProfileSummary, 'tenantId' | 'public' | 'used' | 'createdAt' | 'updatedAt'> & {
    profile: Pick<Profile, 'id' | 'version' | 'target' | 'mode' | 'role' | 'description'>;
  },
): ApiProfileSummary {
  return {
    tenantId: r.tenantId,
    id: r.profile.id,
    version: r.profile.version,
    public: r.public,
    used: r.used,
    shadowed: false,
    target: r.profile.target,
    mode: r.profile.mode ?? 'provision',
    role: r.profile.role ?? null,
    description: r.profile.description ?? null,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

async function storedEntries(
  sql: SqlExecutor,
  tenantId: string,
  after: Entry['key'] | undefined,
  count: number,
): Promise<Entry[]> {
  const { rows } = await sql.query<Record<string, unknown>>(LIST_STORED, [
    tenantId,
    after?.[0] ?? null,
    after === undefined ? null : -after[1],
    after?.[2] ?? null,
    after?.[3] ?? null,
    count,
  ]);
  return rows.map((r) => {
    const rank = Number(r.rank);
    const item = summaryOf({
      tenantId: r.tenant_id as string,
      public: r.public === true,
      used: r.used === true,
      createdAt: iso(r.created_at as Date),
      updatedAt: iso(r.updated_at as Date),
      profile: {
        id: r.id as string,
        version: Number(r.version),
        target: r.target as Profile['target'],
        mode: (r.mode as Profile['mode'] | null) ?? undefined,
        role: (r.role as string | null) ?? undefined,
        description: (r.description as string | null) ?? undefined,
      },
    });
    return { item, key: [item.id, item.version, rank, item.tenantId] };
  });
}

function shippedEntries(engine: Engine, after: Entry['key'] | undefined, count: number): Entry[] {
  const entries: Entry[] = [];
  for (const versions of engine.profiles.values()) {
    for (const profile of versions.values()) {
      const item = summaryOf({
        tenantId: BUILTIN_TENANT,
        public: true,
        used: false,
        createdAt: null,
        updatedAt: null,
        profile,
      });
      entries.push({ item, key: [profile.id, profile.version, 2, BUILTIN_TENANT] });
    }
  }
  return entries
    .filter((e) => after === undefined || compareKeys(e.key, after) > 0)
    .sort((a, b) => compareKeys(a.key, b.key))
    .slice(0, count);
}

/**
 * The `profiles` API group (steps-and-profiles.md, "Profiles"): `create` stores a profile version for a tenant
 * (`compute:profiles:manage`); `get`, `list`, `validate` and `render` read what the tenant can use — its own stored
 * profiles, public stored ones, then shipped ones under `builtin` (`compute:profiles:read`). Every method is decided on
 * the tenant (`compute-tenant`).
 *
 * @example
 * ```ts
 * const provision = provisionModule({ steps, profiles });
 * const { valid, issues } = await compute.api.profiles.validate(token, { tenantId: 'acme', profileId: 'deploy' });
 * ```
 */
export function profilesApi(engine: Engine) {
  const create = defineApiMethod({
    input: v.object({
      ...tenantInput,
      profile: v.unknown(),
      public: v.optional(v.boolean('public must be a boolean')),
    }),
    permission: 'compute:profiles:manage',
    resource: onTenant,
    description:
      'Stores a profile version for the tenant, replacing it until a workflow used it (then INVALID_STATE). ' +
      'Only root credentials may store a public profile.',
    handler: async (input, ctx): Promise<ApiProfile> => {
      if (input.public === true && ctx.principal.tenantId !== ROOT_TENANT_ID) {
        throw new ComputeError('PERMISSION_DENIED', 'only a root credential may store a public profile', {
          details: { path: ['public'], reason: 'public-requires-root', permission: 'compute:profiles:manage' },
        });
      }
      const isPublic = input.public === true;
      const profile = await ctx.sql.transaction((tx) =>
        storeProfile(tx, { tenantId: input.tenantId, profile: input.profile, public: isPublic }, ctx.clock.now()),
      );
      return { tenantId: input.tenantId, public: isPublic, used: false, profile };
    },
  });

  const get = defineApiMethod({
    input: v.object({ ...tenantInput, profileId: textSchema('profileId'), version: v.optional(versionSchema) }),
    permission: 'compute:profiles:read',
    resource: onTenant,
    description:
      'The profile the tenant sees under an id (its own, then a public stored one, then a shipped one), the latest ' +
      'version unless one is given, with where it lives and whether it is used.',
    handler: async (input, ctx): Promise<ApiProfile> => {
      const found = await findProfile(ctx.sql, engine.profiles, input.tenantId, input.profileId, input.version);
      if (!found) throw await profileNotFound(ctx.sql, engine, input.tenantId, input.profileId, input.version);
      return { tenantId: found.tenantId, public: found.public, used: found.used, profile: found.profile };
    },
  });

  const list = defineApiMethod({
    input: v.object({ ...tenantInput, limit: limitSchema, cursor: cursorSchema }),
    permission: 'compute:profiles:read',
    resource: onTenant,
    description:
      'Every profile version the tenant can use: its own, public stored ones and shipped ones (under builtin), ' +
      'by id, newest version first; `nextCursor` fetches the next page.',
    handler: async (input, ctx): Promise<Page<ApiProfileSummary>> => {
      const after =
        input.cursor === undefined
          ? undefined
          : (decodeCursor(input.cursor, PROFILES_LISTING, ['s', 'n', 'n', 's']) as Entry['key']);
      const count = input.limit + 1;
      const merged = [
        ...(await storedEntries(ctx.sql, input.tenantId, after, count)),
        ...shippedEntries(engine, after, count),
      ]
        .sort((a, b) => compareKeys(a.key, b.key))
        .slice(0, count);
      const page = merged.slice(0, input.limit);
      page.forEach((entry, i) => {
        const before = i === 0 ? after : page[i - 1]?.key;
        entry.item.shadowed = before !== undefined && before[0] === entry.key[0] && before[1] === entry.key[1];
      });
      const last = page[page.length - 1];
      const nextCursor = merged.length > input.limit && last ? encodeCursor(PROFILES_LISTING, last.key) : null;
      return { items: page.map((e) => e.item), nextCursor };
    },
  });

  const validate = defineApiMethod({
    input: validateInputSchema,
    permission: 'compute:profiles:read',
    resource: onTenant,
    description:
      'Whether a profile (a document, or a stored or shipped one by id) resolves against this server’s steps: every ' +
      'unresolved use and rejected with, with its path. Never fails for a bad profile.',
    handler: async (input, ctx): Promise<ProfileValidation> => {
      let profile: Profile;
      try {
        ({ profile } = await loadProfile(ctx.sql, engine, input));
        await expand(profile, engine, ctx);
      } catch (error) {
        if (isComputeError(error, 'INVALID_INPUT') || isComputeError(error, 'INVALID_CONFIG')) {
          return { valid: false, issues: issuesOf(error) };
        }
        throw error;
      }
      return { valid: true, issues: [] };
    },
  });

  const render = defineApiMethod({
    input: renderInputSchema,
    permission: 'compute:profiles:read',
    resource: onTenant,
    description:
      'The steps a profile expands to, in run order; with a node of the tenant, whether each will run on its labels. ' +
      'A profile that does not resolve is INVALID_INPUT listing every issue.',
    handler: async (input, ctx): Promise<ProfileRendering> => {
      let loaded: { profile: Profile; tenantId: string | null };
      try {
        loaded = await loadProfile(ctx.sql, engine, input);
      } catch (error) {
        throw withIssues(error);
      }
      const labels = input.nodeId === undefined ? undefined : await nodeLabels(ctx.sql, input.tenantId, input.nodeId);
      let expansion: Awaited<ReturnType<typeof expand>>;
      try {
        expansion = await expand(loaded.profile, engine, ctx);
      } catch (error) {
        throw withIssues(error);
      }
      return {
        tenantId: loaded.tenantId,
        profileId: loaded.profile.id,
        version: loaded.profile.version,
        nodeId: input.nodeId ?? null,
        commandKinds: expansion.commandKinds,
        steps: renderSteps(loaded.profile, expansion.steps, labels),
      };
    },
  });

  return defineApiGroup('profiles', { create, get, list, validate, render });
}
