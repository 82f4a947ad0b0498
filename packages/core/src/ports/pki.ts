import type { StagedWrite } from '../commit/commit';
import type { SqlExecutor } from '../sql/executor';
import type { SecretRef } from './secrets';

/** The roles an agent joins as. */
export type JoinRole = 'node' | 'site' | 'provisioned' | 'discovery';

/** Hardware claims a join token may expect; a join whose claims differ is refused without spending a use. */
export interface HardwareExpectation {
  mac?: string;
  productUuid?: string;
  serial?: string;
  gpuUuid?: string;
}

/** What minting a join token takes. */
export interface IssueJoinTokenInput {
  tenantId: string;
  role: JoinRole;
  poolId?: string;
  siteId?: string;
  /** The node a `node`, `site` or `provisioned` join binds to (a `provisioned` token maps back to it). */
  nodeId?: string;
  ttlSeconds: number;
  maxUses?: number;
  expect?: HardwareExpectation;
}

/**
 * The PKI port of the module and step context (`ctx.pki`).
 *
 * @example
 * ```ts
 * const { id, token } = await ctx.pki!.issueJoinToken(tx, { tenantId: 'root', role: 'provisioned', ttlSeconds: 7200, maxUses: 1 });
 * ```
 */
export interface PkiPort {
  issueJoinToken(tx: SqlExecutor, input: IssueJoinTokenInput): Promise<{ id: string; token: string }>;
  /**
   * Mints a join token and stores its value as a secret of `secretTenantId` (as `ctx.secrets.put` would), in one
   * statement, returning only the secret's reference: for a token that travels by reference (a boot entry's), one round
   * trip instead of two, and the value never reaches the caller. Optional: without it, mint, then `secrets.put`.
   *
   * @example
   * ```ts
   * const { ref } = await ctx.pki!.issueJoinTokenSecret!(ctx.sql, { tenantId, role: 'node', nodeId, ttlSeconds: 3600, maxUses: 1, secretTenantId });
   * ```
   */
  issueJoinTokenSecret?(
    tx: SqlExecutor,
    input: IssueJoinTokenInput & { secretTenantId: string },
  ): Promise<{ id: string; ref: SecretRef }>;
  /**
   * A join token as {@link PkiPort.issueJoinToken} mints it, prepared without the database: its value now (to render
   * into a document), the row written by the caller's own commit (`write.changes`, only while the tenant, and the site
   * and node the token names in it, exist, else the commit writes nothing) or alone in a transaction (`write.write`,
   * NOT_FOUND). A token staged with a step's result exists exactly when the step succeeded. Optional.
   *
   * @example
   * ```ts
   * const { id, token, write } = ctx.pki!.stageJoinToken!({ tenantId, role: 'provisioned', nodeId, ttlSeconds: 7200, maxUses: 1 });
   * ctx.writeWithResult?.(write);
   * ```
   */
  stageJoinToken?(input: IssueJoinTokenInput): { id: string; token: string; write: StagedWrite };
  /**
   * The same token and secret as {@link PkiPort.issueJoinTokenSecret}, prepared without the database: the caller
   * writes them with its own commit (`write.changes`, all or nothing with it: a boot entry's send carries the token
   * it references, so the token exists exactly when the command does), or in its transaction (`write.write`). An
   * unknown tenant, site or node makes the commit stale (`write.write`: NOT_FOUND). Optional.
   *
   * @example
   * ```ts
   * const { ref, write } = ctx.pki!.stageJoinTokenSecret!({ tenantId, role: 'node', nodeId, ttlSeconds: 3600, maxUses: 1, secretTenantId });
   * await awaitCommand(ctx, { nodeId: agentId, kind: 'site.bootEntry', payload: { mac, tokenRef: ref }, with: write });
   * ```
   */
  stageJoinTokenSecret?(input: IssueJoinTokenInput & { secretTenantId: string }): {
    id: string;
    ref: SecretRef;
    write: StagedWrite;
  };
}
