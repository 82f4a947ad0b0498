import type { ModuleContext, SqlExecutor } from '@better-compute/core';

// The secret references the boot entries of one workflow carried (a `site.bootEntry` carries only `tokenRef`),
// through the commands' index by workflow.
const BOOT_ENTRY_REFS_SQL = `SELECT DISTINCT c.payload->>'tokenRef' AS ref FROM commands c
  WHERE c.workflow_id = $1 AND c.kind = 'site.bootEntry'`;

/**
 * Deletes the secrets that held the join tokens of the boot entries a workflow sent: `metal.ensureRamdisk` deletes
 * them itself once the ramdisk has joined, so a workflow that failed or was aborted while it waited (the machine never
 * came back, an operator's `metal.abort`) would leave them behind. With the broker's `stageDelete` the deletion is
 * written in the caller's transaction (it commits with the move); with only `delete`, the references come back for
 * the caller to delete once its transaction committed ({@link forgetSecretsAfterCommit}); a broker that can do neither
 * leaves them. Only references are read, never the tokens. Deleting twice is harmless.
 *
 * @example
 * ```ts
 * const left = await forgetBootEntrySecrets(tx, ctx, workflowId);
 * // after the commit:
 * await forgetSecretsAfterCommit(ctx, left);
 * ```
 */
export async function forgetBootEntrySecrets(
  tx: SqlExecutor,
  ctx: Pick<ModuleContext, 'secrets'>,
  workflowId: string,
): Promise<string[]> {
  const stage = ctx.secrets?.stageDelete?.bind(ctx.secrets);
  if (!stage && !ctx.secrets?.delete) return [];
  const { rows } = await tx.query<{ ref: string | null }>(BOOT_ENTRY_REFS_SQL, [workflowId]);
  const refs = rows.map((row) => row.ref).filter((ref): ref is string => typeof ref === 'string' && ref.length > 0);
  if (refs.length === 0) return [];
  if (!stage) return refs;
  await stage(refs).write(tx);
  return [];
}

/**
 * Deletes secrets one by one through `ctx.secrets.delete` after the caller's transaction committed. Best effort: a
 * failure is logged (by reference, never the value) and leaves the sealed secret behind, as a crash before this call
 * would.
 *
 * @example
 * ```ts
 * await forgetSecretsAfterCommit(ctx, ['sec_…']);
 * ```
 */
export async function forgetSecretsAfterCommit(
  ctx: Pick<ModuleContext, 'secrets' | 'log'>,
  refs: readonly string[],
): Promise<void> {
  const remove = ctx.secrets?.delete?.bind(ctx.secrets);
  if (!remove) return;
  for (const ref of refs) {
    try {
      await remove(ref);
    } catch (error) {
      ctx.log.warn('metal could not delete a secret it no longer needs', {
        secretRef: ref,
        errorName: error instanceof Error ? error.name : typeof error,
      });
    }
  }
}
