import { ComputeError, type ComputeModule, type ErrorPath, type SqlExecutor } from '@better-compute/core';
import { assertStorableText } from '@better-compute/core/checks';
import { checkProfile } from '../define/define-profile';
import type { Profile } from '../define/types';

/**
 * The tenant shipped profiles are listed under.
 *
 * @example
 * ```ts
 * const found = await findProfile(sql, shipped, 'acme', 'deploy');
 * found?.tenantId === BUILTIN_TENANT; // a shipped profile
 * ```
 */
export const BUILTIN_TENANT = 'builtin';

/** Shipped profiles by id, then version. */
export type ShippedProfiles = ReadonlyMap<string, ReadonlyMap<number, Profile>>;

/** A profile version found by {@link findProfile}: where it lives, and whether a workflow used it already. */
export interface FoundProfile {
  profile: Profile;
  /** The owning tenant, or `builtin` for a shipped profile. */
  tenantId: string;
  public: boolean;
  used: boolean;
}

/**
 * Indexes shipped profiles (provision's own and those of the given modules' `profiles`), checking each again; an id and
 * version shipped twice is INVALID_CONFIG.
 *
 * @example
 * ```ts
 * const shipped = buildShippedProfiles([ubuntuAutoinstall], [acmeAutoinstall]);
 * ```
 */
export function buildShippedProfiles(own: readonly unknown[], modules: readonly ComputeModule[]): ShippedProfiles {
  const byId = new Map<string, Map<number, Profile>>();
  const add = (candidate: unknown, path: ErrorPath) => {
    let profile: Profile;
    try {
      profile = checkProfile(candidate);
    } catch (error) {
      if (error instanceof ComputeError) {
        throw new ComputeError(error.code, error.message, {
          details: { ...error.details, path: [...path, ...(error.details.path ?? [])] },
          cause: error,
        });
      }
      throw error;
    }
    const versions = byId.get(profile.id) ?? new Map<number, Profile>();
    if (versions.has(profile.version)) {
      throw new ComputeError('INVALID_CONFIG', `profile ${profile.id} version ${profile.version} is shipped twice`, {
        details: { path },
      });
    }
    versions.set(profile.version, profile);
    byId.set(profile.id, versions);
  };
  own.forEach((profile, i) => {
    add(profile, ['profiles', i]);
  });
  modules.forEach((module, m) => {
    const profiles = (module as { profiles?: readonly unknown[] }).profiles ?? [];
    profiles.forEach((profile, i) => {
      add(profile, ['modules', m, 'profiles', i]);
    });
  });
  return byId;
}

interface ProfileRow {
  tenant_id: string;
  public: boolean;
  document: Profile;
  used_at: Date | null;
}

/**
 * The shipped profile `id` (at `version`, else its latest), if one is shipped: what {@link findProfile} falls back to.
 *
 * @example
 * ```ts
 * latestShipped(engine.profiles, 'metal.inspect')?.version; // 1
 * ```
 */
export function latestShipped(shipped: ShippedProfiles, id: string, version?: number): Profile | undefined {
  const versions = shipped.get(id);
  if (!versions) return undefined;
  if (version !== undefined) return versions.get(version);
  return versions.get(Math.max(...versions.keys()));
}

/**
 * Looks a profile up in the documented order: the tenant's own stored profile, then a public stored one, then a
 * shipped one. Without `version`, the latest version of the first place that has the id.
 *
 * @example
 * ```ts
 * const found = await findProfile(tx, engine.profiles, 'acme', 'ubuntu-24.04-autoinstall', 1);
 * ```
 */
export async function findProfile(
  sql: SqlExecutor,
  shipped: ShippedProfiles,
  tenantId: string,
  id: string,
  version?: number,
): Promise<FoundProfile | undefined> {
  const { rows } = await sql.query<ProfileRow>(
    `SELECT tenant_id, public, document, used_at FROM profiles
     WHERE id = $2 AND (tenant_id = $1 OR public) AND ($3::int IS NULL OR version = $3)
     ORDER BY (tenant_id = $1) DESC, version DESC, tenant_id LIMIT 1`,
    [tenantId, id, version ?? null],
  );
  const row = rows[0];
  if (row) return { profile: row.document, tenantId: row.tenant_id, public: row.public, used: row.used_at !== null };
  const profile = latestShipped(shipped, id, version);
  return profile ? { profile, tenantId: BUILTIN_TENANT, public: true, used: false } : undefined;
}

/** What {@link storeProfile} takes. */
export interface StoreProfileInput {
  tenantId: string;
  profile: unknown;
  /** Visible to every tenant (after its own). Default false. */
  public?: boolean;
}

/**
 * Stores a profile version for a tenant. The document is checked as `defineProfile` does, with INVALID_INPUT. Storing
 * a version again replaces it until a workflow used it; after that it is immutable (INVALID_STATE, reason
 * `profile-version-used`). The tenant `builtin` is read-only.
 *
 * @example
 * ```ts
 * await db.transaction((tx) => storeProfile(tx, { tenantId: 'acme', profile: { id: 'deploy', version: 2, target: 'metal', steps } }, clock.now()));
 * ```
 */
export async function storeProfile(tx: SqlExecutor, input: StoreProfileInput, now: Date): Promise<Profile> {
  if (typeof input?.tenantId !== 'string' || input.tenantId.length === 0) {
    throw new ComputeError('INVALID_INPUT', 'tenantId must be a non-empty string', { details: { path: ['tenantId'] } });
  }
  assertStorableText(input.tenantId, ['tenantId']);
  if (input.tenantId === BUILTIN_TENANT) {
    throw new ComputeError('INVALID_INPUT', 'shipped profiles are read-only', { details: { path: ['tenantId'] } });
  }
  const profile = checkProfile(input.profile, 'INVALID_INPUT');
  const { rows } = await tx.query<{ used_at: Date | null }>(
    `INSERT INTO profiles (tenant_id, id, version, public, document, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6)
     ON CONFLICT (tenant_id, id, version) DO UPDATE SET public = EXCLUDED.public, document = EXCLUDED.document,
       updated_at = EXCLUDED.updated_at WHERE profiles.used_at IS NULL
     RETURNING used_at`,
    [input.tenantId, profile.id, profile.version, input.public === true, JSON.stringify(profile), now],
  );
  if (rows.length === 0) {
    throw new ComputeError(
      'INVALID_STATE',
      `profile ${profile.id} version ${profile.version} was used by a workflow and is immutable; store a new version`,
      { details: { path: ['profile', 'version'], reason: 'profile-version-used' } },
    );
  }
  return profile;
}

/**
 * Marks a stored profile version used (immutable from now on); shipped profiles are read-only anyway.
 *
 * @example
 * ```ts
 * await markProfileUsed(tx, found, clock.now());
 * ```
 */
export async function markProfileUsed(tx: SqlExecutor, found: FoundProfile, now: Date): Promise<void> {
  if (found.tenantId === BUILTIN_TENANT || found.used) return;
  await tx.query(
    'UPDATE profiles SET used_at = $4 WHERE tenant_id = $1 AND id = $2 AND version = $3 AND used_at IS NULL',
    [found.tenantId, found.profile.id, found.profile.version, now],
  );
}
