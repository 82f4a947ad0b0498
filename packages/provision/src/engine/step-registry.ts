import { ComputeError, type ComputeModule, type ErrorPath } from '@better-compute/core';
import type { Step } from '../define/types';

/** Every step the engine resolves, by id, with where it came from. */
export type StepRegistry = ReadonlyMap<string, Step>;

function isStep(value: unknown): value is Step {
  if (typeof value !== 'object' || value === null) return false;
  const step = value as Partial<Step>;
  return step.extension === 'step' && typeof step.id === 'string' && typeof step.runsOn === 'string';
}

/**
 * Builds the one namespace of step ids from provision's own steps and the steps the given modules register as
 * extensions. Anything not made by `defineStep`, or an id seen twice, is INVALID_CONFIG naming the place.
 *
 * @example
 * ```ts
 * const steps = createStepRegistry([renderIso], [metal()]);
 * steps.get('autoinstall.renderIso');
 * ```
 */
export function createStepRegistry(own: readonly unknown[], modules: readonly ComputeModule[]): StepRegistry {
  const steps = new Map<string, Step>();
  const where = new Map<string, string>();
  const add = (candidate: unknown, path: ErrorPath, label: string) => {
    if (!isStep(candidate)) {
      throw new ComputeError('INVALID_CONFIG', `${label} is not a step made by defineStep`, { details: { path } });
    }
    const previous = where.get(candidate.id);
    if (previous) {
      throw new ComputeError(
        'INVALID_CONFIG',
        `step '${candidate.id}' is registered twice: by ${previous} and by ${label}`,
        {
          details: { path, stepId: candidate.id },
        },
      );
    }
    where.set(candidate.id, label);
    steps.set(candidate.id, candidate);
  };
  own.forEach((step, i) => {
    add(step, ['steps', i], `steps[${i}]`);
  });
  modules.forEach((module, m) => {
    (module.extensions ?? []).forEach((extension, e) => {
      if (extension.extension === 'step') add(extension, ['modules', m, 'extensions', e], `module '${module.id}'`);
    });
  });
  return steps;
}
