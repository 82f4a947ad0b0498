import { ComputeError, type ComputeModule } from '@better-compute/core';
import type { Step } from '../define/types';
import { createStepRegistry, type StepRegistry } from '../engine/step-registry';
import type { UserDataOptions } from '../user-data/options';
import { userDataRenderStep } from './userdata-render';
import { waitAgentJoined } from './wait-agent-joined';
import { waitObservedGeneration } from './wait-observed-generation';

/**
 * The steps provision registers as its own before any given to it: `userdata.render` (with the module's user-data
 * options), `wait.agentJoined` and `wait.observedGeneration`.
 *
 * @example
 * ```ts
 * builtinSteps({ controlPlaneUrl }).map((s) => s.id); // ['userdata.render', 'wait.agentJoined', 'wait.observedGeneration']
 * ```
 */
export function builtinSteps(userData?: UserDataOptions): Step[] {
  return [userDataRenderStep(userData), waitAgentJoined, waitObservedGeneration];
}

/**
 * Builds provision's step namespace: the built-in steps, then its own `steps`, then the steps of `modules`. The
 * caller's steps are checked first with their own paths (`['steps', i]`, `['modules', m, 'extensions', e]`), and a
 * step reusing a built-in id is INVALID_CONFIG there.
 *
 * @example
 * ```ts
 * const steps = buildProvisionSteps(builtinSteps(options.userData), options.steps ?? [], options.modules ?? []);
 * ```
 */
export function buildProvisionSteps(
  builtin: readonly Step[],
  own: readonly unknown[],
  modules: readonly ComputeModule[],
): StepRegistry {
  createStepRegistry(own, modules);
  const ids = new Set(builtin.map((step) => step.id));
  const clash = (id: unknown, path: (string | number)[], label: string) => {
    if (typeof id === 'string' && ids.has(id)) {
      throw new ComputeError('INVALID_CONFIG', `step '${id}' is built into provision; ${label} cannot register it`, {
        details: { path, stepId: id },
      });
    }
  };
  own.forEach((step, i) => {
    clash((step as Step).id, ['steps', i], `steps[${i}]`);
  });
  modules.forEach((module, m) => {
    (module.extensions ?? []).forEach((extension, e) => {
      if (extension.extension === 'step') {
        clash((extension as { id?: unknown }).id, ['modules', m, 'extensions', e], `module '${module.id}'`);
      }
    });
  });
  return createStepRegistry([...builtin, ...own], modules);
}
