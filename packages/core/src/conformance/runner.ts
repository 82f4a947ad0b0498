/**
 * The assertions a conformance suite makes, as vitest's (or jest's) `expect(actual)` offers them. A suite only needs
 * these, so core depends on no test runner: pass the runner's own `expect`.
 *
 * @example
 * ```ts
 * const assertion: ConformanceAssertion = expect(command);
 * assertion.toMatchObject({ state: 'pending' });
 * ```
 */
export interface ConformanceAssertion {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toMatchObject(expected: object): void;
  toHaveLength(length: number): void;
  toMatch(expected: string | RegExp): void;
  toBeUndefined(): void;
  readonly rejects: { toMatchObject(expected: object): Promise<void> };
}

/**
 * The parts of a test runner a conformance suite registers its tests with: vitest's `describe`, `it`, `beforeEach`
 * and `expect` fit as they are.
 *
 * @example
 * ```ts
 * import { beforeEach, describe, expect, it } from 'vitest';
 * const runner: ConformanceRunner = { describe, it, beforeEach, expect };
 * ```
 */
export interface ConformanceRunner {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>): void;
  beforeEach(hook: () => Promise<void>): void;
  expect(actual: unknown): ConformanceAssertion;
}
