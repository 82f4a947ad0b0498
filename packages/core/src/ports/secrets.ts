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
}
