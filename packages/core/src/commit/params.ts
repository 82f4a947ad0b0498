import { ComputeError } from '../errors';

// The commit's own CTE names, which a module's change may not take.
const RESERVED = new Set(['fence', 'sent', 'requeued', 'finished', 'published', 'woken', 'g', 'commit_one']);
const NAME = /^[a-z][a-z0-9_]{0,62}$/;

/**
 * Refuses a change name that is not a plain lower-case SQL identifier or that the commit uses itself (INTERNAL: a
 * module's programming error, never an input's).
 *
 * @example
 * ```ts
 * checkChangeName('wf'); // fine; checkChangeName('fence') throws
 * ```
 */
export function checkChangeName(name: string): void {
  if (!NAME.test(name) || RESERVED.has(name)) {
    throw new ComputeError('INTERNAL', `a commit change cannot be named ${JSON.stringify(name)}`);
  }
}
