import { ComputeError, type ComputeModule } from '@better-compute/core';
import { batchesApi } from './api/batches-api';
import { metalApi } from './api/metal-api';
import { sitesApi } from './api/sites-api';
import { METAL_COMMAND_KINDS } from './commands/kinds';
import { metalFindings } from './doctor/findings';
import { PHASE_PROFILES, type PhaseState } from './lifecycle/states';
import type { PhaseProfiles } from './machines/apply-move';
import { metalEndWrite } from './machines/end-write';
import { METAL_WORK_KIND, metalReconciler } from './machines/reconciler';
import { metalMigrationsFolder } from './migrations-folder';
import { metalProfiles } from './profiles';
import { metalExtensions } from './steps';

/** What {@link metal} takes. */
export interface MetalOptions {
  /**
   * The profile each phase's workflow runs, replacing the shipped one (`metal.enroll`, `metal.inspect`,
   * `metal.commission`, `metal.release`, `metal.retire`, `metal.adopt`): a site with its own commissioning, or a test
   * with stub profiles. A deploy always runs the profile its request names.
   */
  profiles?: Partial<Record<Exclude<PhaseState, 'deploying'>, string>>;
}

const PHASES = ['enrolling', 'inspecting', 'commissioning', 'releasing', 'retiring', 'adopting'] as const;

function phaseProfiles(overrides: MetalOptions['profiles'] = {}): PhaseProfiles {
  if (typeof overrides !== 'object' || overrides === null) {
    throw new ComputeError('INVALID_CONFIG', 'profiles must be an object of phase → profile id', {
      details: { path: ['profiles'] },
    });
  }
  for (const key of Object.keys(overrides)) {
    if (!(PHASES as readonly string[]).includes(key)) {
      throw new ComputeError('INVALID_CONFIG', `profiles.${key} is not a phase with a profile of its own`, {
        details: { path: ['profiles', key] },
      });
    }
    const id = (overrides as Record<string, unknown>)[key];
    if (typeof id !== 'string' || id.length === 0 || id.length > 128) {
      throw new ComputeError('INVALID_CONFIG', `profiles.${key} must be a profile id`, {
        details: { path: ['profiles', key] },
      });
    }
  }
  return Object.freeze(
    Object.fromEntries(PHASES.map((phase) => [phase, overrides[phase] ?? PHASE_PROFILES[phase]])),
  ) as PhaseProfiles;
}

/**
 * The metal module: its tables, the command kinds its steps send, its steps and shipped profiles (the provision
 * engine borrows both when metal is listed in `provisionModule({ modules })`), the `metal` reconciler that moves a
 * machine on when its phase's workflow ends (and when its workflow's destructive batch is approved or rejected), the
 * `metal`, `sites` and `batches` API groups, and its findings (`metal-failed`,
 * `metal-stalled`). List it both in `betterCompute({ modules })` and in
 * `provisionModule({ modules })`:
 *
 * @example
 * ```ts
 * const bareMetal = metal();
 * const compute = await betterCompute({ modules: [provisionModule({ modules: [bareMetal] }), bareMetal] });
 * ```
 */
export function metal(options: MetalOptions = {}) {
  const profiles = phaseProfiles(options.profiles);
  const module = {
    id: 'metal' as const,
    dependsOn: ['provision'],
    migrations: { folder: metalMigrationsFolder },
    commandKinds: METAL_COMMAND_KINDS,
    extensions: [...metalExtensions, metalEndWrite(profiles)],
    profiles: metalProfiles,
    reconcilers: { [METAL_WORK_KIND]: metalReconciler(profiles) },
    api: { metal: metalApi(profiles), sites: sitesApi(), batches: batchesApi() },
    findings: metalFindings,
    /** The profile each phase runs, after `options.profiles`. */
    phaseProfiles: profiles,
  } satisfies ComputeModule & { profiles: readonly unknown[]; phaseProfiles: PhaseProfiles };
  return Object.freeze(module);
}

/** What {@link metal} returns. */
export type MetalModule = ReturnType<typeof metal>;
