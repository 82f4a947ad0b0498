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
