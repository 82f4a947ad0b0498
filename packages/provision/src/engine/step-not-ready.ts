import { ENGINE_DEFAULTS } from './constants';

const BRAND = Symbol.for('better-compute.step-not-ready');

/**
 * What a step throws when it cannot finish yet: the engine settles nothing and runs the step again after `ms`, never
 * later than its deadline.
 */
export class StepNotReady extends Error {
  override readonly name = 'StepNotReady';
  readonly [BRAND] = true;
  constructor(readonly ms: number) {
    super(`step not ready; run again in ${ms} ms`);
  }
}

/**
 * Makes the error a step throws to be run again after `ms` (5,000 by default).
 *
 * @example
 * ```ts
 * if (Number(rows[0].observed_generation) < Number(rows[0].generation)) throw stepNotReady(5_000);
 * ```
 */
export function stepNotReady(ms: number = ENGINE_DEFAULTS.stepNotReadyMs): StepNotReady {
  const delay = Number.isFinite(ms) && ms >= 0 ? Math.round(ms) : ENGINE_DEFAULTS.stepNotReadyMs;
  return new StepNotReady(delay);
}

/**
 * Whether a thrown value asks to run the step again later (works across copies of the package).
 *
 * @example
 * ```ts
 * try { await step.run(input, ctx); } catch (err) { if (isStepNotReady(err)) wait(err.ms); }
 * ```
 */
export function isStepNotReady(value: unknown): value is StepNotReady {
  return typeof value === 'object' && value !== null && (value as { [BRAND]?: boolean })[BRAND] === true;
}
