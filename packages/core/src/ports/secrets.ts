import type { StagedWrite } from '../commit/commit';

/** A reference to a stored secret (`sec_…`): what travels in commands and results instead of the value. */
export type SecretRef = string;

/**
 * The secret broker port (`ctx.secrets`): values are encrypted at rest and only references leave it.
 *
 * @example
 * ```ts
 * const ref = await ctx.secrets!.put('root', renderedDocument);
 * ```
 */
export interface SecretBroker {
  put(tenantId: string, value: string): Promise<SecretRef>;
  resolve(ref: SecretRef): Promise<string>;
  delete?(ref: SecretRef): Promise<void>;
  /**
   * The deletion of `refs` prepared for the caller's own commit (its `changes`, written with the commit's gate) or
   * written alone in a transaction (`write(tx)`): a step that no longer needs secrets deletes them with its result
   * (`ctx.writeWithResult`). A reference already gone is no error.
   */
  stageDelete?(refs: readonly SecretRef[]): StagedWrite;
  /**
   * `put` prepared for the caller's own commit: the reference now, the value stored by `write.changes` (with the
   * commit's gate, only in a tenant that exists, else the commit writes nothing) or alone in a transaction
   * (`write.write(tx)`, NOT_FOUND for an unknown tenant). A step that stores a document with its result
   * (`ctx.writeWithResult`) leaves nothing behind when it does not succeed. Bad input throws at once (INVALID_INPUT).
   *
   * @example
   * ```ts
   * const { ref, write } = ctx.secrets!.stagePut!('root', document);
   * ctx.writeWithResult?.(write);
   * ```
   */
  stagePut?(tenantId: string, value: string): { ref: SecretRef; write: StagedWrite };
}
