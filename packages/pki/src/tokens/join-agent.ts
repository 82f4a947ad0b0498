import { ComputeError, type JoinRole, type Logger, type SqlExecutor } from '@better-compute/core';
import { silentLogger } from '@better-compute/core/kernel';
import { type IssueDeps, issueAgentCertificate, revokeNodeCertificates } from '../ca/agent-certificates';
import { parsePublicKey } from '../crypto/keys';
import { type Attestor, discoveryAttestor, nodeAttestor, provisionedTargetResolver, siteAttestor } from './attestors';
import { mismatchedClaims, parseClaims } from './claims';
import { earlierJoinAnswer } from './join-again';
import { lookupJoinToken, spendJoinToken, tokenUnusable } from './join-tokens';
import { requireObject } from './validate';

/** What an agent sends to join: its join token, its public key (JWK or SPKI PEM) and its hardware claims. */
export interface JoinAgentInput {
  token: string;
  publicKey: unknown;
  claims?: unknown;
}

/** What a join returns: the node it became and its certificate. */
export interface JoinAgentResult {
  nodeId: string;
  tenantId: string;
  siteId: string | null;
  role: JoinRole;
  joinTokenId: string;
  serial: string;
  certificatePem: string;
  caCertificatePem: string;
  expiresAt: Date;
}

/** What joining needs: the CA's dependencies, the attestors per role and a logger. */
export interface JoinDeps extends IssueDeps {
  attestors?: Partial<Record<JoinRole, Attestor>>;
  log?: Logger;
}

/**
 * The attestors every role gets unless configured otherwise.
 *
 * @example
 * ```ts
 * const attestors = { ...defaultAttestors(), discovery: myAttestor };
 * ```
 */
export function defaultAttestors(): Record<JoinRole, Attestor> {
  return {
    discovery: discoveryAttestor(),
    node: nodeAttestor(),
    site: siteAttestor(),
    provisioned: provisionedTargetResolver(),
  };
}

/**
 * Joins an agent: checks the token (constant time), its expiry, uses and revocation, then the hardware claims against
 * the token's `expect` (a mismatch is PERMISSION_DENIED `claims-mismatch` and spends nothing), then in one savepoint
 * spends a use, lets the role's attestor pick the node, revokes that node's earlier certificates (`superseded`) and
 * issues a certificate. Token refusals are UNAUTHENTICATED with `details.reason` `token-unknown`, `token-expired`,
 * `token-exhausted` or `token-revoked`. A token with no use left, presented again with the public key and claims of a
 * join it served less than 10 minutes ago, answers that join's certificate again (still valid, not superseded):
 * an agent whose answer was lost is not stuck (`earlierJoinAnswer`).
 *
 * @example
 * ```ts
 * const joined = await db.transaction((tx) => joinAgent(tx, { token, publicKey: jwk, claims: { mac: '52:54:00:12:34:56' } }, { key, clock }));
 * ```
 */
export async function joinAgent(tx: SqlExecutor, input: JoinAgentInput, deps: JoinDeps): Promise<JoinAgentResult> {
  const log = deps.log ?? silentLogger;
  const object = requireObject(input, []);
  const publicKey = parsePublicKey(object.publicKey, ['publicKey']);
  const claims = parseClaims(object.claims);
  let tokenId: string | undefined;
  try {
    const token = await lookupJoinToken(tx, object.token);
    tokenId = token.id;
    const now = deps.clock.now();
    const unusable = tokenUnusable(token, now);
    if (unusable && unusable.details.reason !== 'token-exhausted') throw unusable;
    const mismatched = mismatchedClaims(token.expect, claims);
    if (mismatched.length > 0) {
      throw new ComputeError('PERMISSION_DENIED', 'the hardware claims do not match the join token', {
        details: { path: ['claims', mismatched[0] as string], reason: 'claims-mismatch', claims: mismatched },
      });
    }
    if (unusable) {
      // Spent: the same agent asking again (its answer lost on the way) gets the certificate its join was issued.
      const again = await earlierJoinAnswer(tx, token.id, publicKey, now, deps);
      if (!again) throw unusable;
      log.info('agent join answered again', { nodeId: again.nodeId, joinTokenId: token.id, serial: again.serial });
      return { ...again, role: token.role, joinTokenId: token.id };
    }
    const attestor = { ...defaultAttestors(), ...deps.attestors }[token.role];
    const joined = await tx.transaction(async (inner) => {
      await spendJoinToken(inner, token.id, now);
      const node = await attestor(inner, { token, claims, clock: deps.clock });
      await revokeNodeCertificates(inner, node.nodeId, 'superseded', deps);
      return issueAgentCertificate(inner, { ...node, role: token.role }, publicKey.jwk, deps, token.id);
    });
    log.info('agent joined', { nodeId: joined.nodeId, role: token.role, joinTokenId: token.id, serial: joined.serial });
    return {
      nodeId: joined.nodeId,
      tenantId: joined.tenantId,
      siteId: joined.siteId,
      role: token.role,
      joinTokenId: token.id,
      serial: joined.serial,
      certificatePem: joined.certificatePem,
      caCertificatePem: joined.caCertificatePem,
      expiresAt: joined.expiresAt,
    };
  } catch (error) {
    if (error instanceof ComputeError) {
      log.warn('join refused', { joinTokenId: tokenId, code: error.code, reason: error.details.reason });
    }
    throw error;
  }
}
