import { ComputeError } from '../errors';

/** Adds a parameter to a statement and returns its placeholder (`$1`, `$2`, … in the order of the calls). */
export type Bind = (value: unknown) => string;

/**
 * A parameter list and the function that fills it, so a statement built from parts never numbers a placeholder by
 * hand.
 *
 * @example
 * ```ts
 * const { bind, params } = bindParams();
 * const text = `UPDATE nodes SET state = ${bind('ready')} WHERE id = ${bind(id)}`; // $1, $2
 * await sql.query(text, params);
 * ```
 */
export function bindParams(): { bind: Bind; params: unknown[] } {
  const params: unknown[] = [];
  const bind: Bind = (value) => {
    params.push(value);
    return `$${params.length}`;
  };
  return { bind, params };
}

// The commit's own CTE names, which a module's change may not take.
const RESERVED = new Set(['fence', 'sent', 'requeued', 'published', 'g', 'commit_one']);
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
