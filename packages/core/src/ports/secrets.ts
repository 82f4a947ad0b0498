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
}
