import type { Json } from '@better-compute/core';
import type { Known, Need } from './plan';
import type { EngineEnv } from './transitions';
import type { ClaimKnown, LoadedWorkflow } from './workflow-rows';

/**
 * What the worker's claim read that answers a transition's plain reads (see `PLAIN_READS`): the node's site agent
 * and agent session (`ClaimKnown`) and the modules' preloads, for driver targets that can take their fields from
 * them. Good for transitions planned right after the claim; once the pass ran a control-plane step, see
 * {@link answersAfterRun}.
 */
export interface ClaimAnswers {
  readonly nodeId: string;
  readonly siteId: string | null;
  readonly known: ClaimKnown;
  readonly reads: Readonly<Record<string, Json>>;
  /** A control-plane step ran since the claim: a plan decided on its session checks the session is still current. */
  readonly afterRun?: true;
}

/**
 * How long after its claim a pass that ran a control-plane step still takes the node's site agent and a driver
 * target's fields from it: those change on their own clock (an agent's connection, an operator), not by the run, and
 * an answer this young is as good as a read made now.
 */
export const CLAIM_ANSWERS_FRESH_MS = 1_000;

/**
 * The claim's answers once the pass ran a control-plane step, `elapsedMs` after the claim: none at all past
 * {@link CLAIM_ANSWERS_FRESH_MS} (a run may have taken minutes); else marked `afterRun`, so that a plan decided on the
 * agent session checks, in its statement, that it is still the node's current one (a run may have rebooted the
 * machine, or seen it come back, and a rejoin must record the session as it is just before the reboot it waits past).
 *
 * @example
 * ```ts
 * claim = answersAfterRun(claim, performance.now() - claimedAt);
 * ```
 */
export function answersAfterRun(answers: ClaimAnswers | undefined, elapsedMs: number): ClaimAnswers | undefined {
  if (!answers || elapsedMs > CLAIM_ANSWERS_FRESH_MS) return undefined;
  return answers.afterRun ? answers : { ...answers, afterRun: true };
}

/**
 * The claim's answers for a snapshot read by the claim (undefined for one read by the pass, or a workflow without
 * a node).
 *
 * @example
 * ```ts
 * const answers = claimAnswersOf(snapshot);
 * ```
 */
export function claimAnswersOf(snapshot: LoadedWorkflow | null | undefined): ClaimAnswers | undefined {
  const node = snapshot?.workflow.node;
  const known = snapshot?.stepReads?.known;
  if (!node || !known || !snapshot?.stepReads) return undefined;
  return { nodeId: node.id, siteId: node.siteId ?? null, known, reads: snapshot.stepReads.reads };
}

/**
 * What the claim read for `need`, as `readNeed` would have read it, or undefined when the claim did not read it (a
 * session of another node, a site the workflow's node is not in, a driver target that cannot answer from the reads).
 *
 * @example
 * ```ts
 * const known = answerFromClaim(env, answers, need) ?? (await readNeed(ctx.sql, env, need, now));
 * ```
 */
export function answerFromClaim(env: EngineEnv, answers: ClaimAnswers, need: Need): Known | undefined {
  switch (need.kind) {
    case 'site-agent': {
      if (need.siteId === undefined || need.nodeId !== answers.nodeId || need.siteId !== answers.siteId)
        return undefined;
      if (answers.siteId === null) return { siteAgent: null };
      const { siteAgentId } = answers.known;
      return { siteAgent: siteAgentId === null ? null : { nodeId: siteAgentId } };
    }
    case 'agent-session':
      return need.nodeId === answers.nodeId ? { session: answers.known.session } : undefined;
    case 'driver-target': {
      if (need.nodeId !== answers.nodeId) return undefined;
      const driverFields: Record<string, Json> = {};
      for (const target of env.driverTargets ?? []) {
        const fields = target.fromReads?.(answers.reads, { nodeId: need.nodeId });
        if (fields === undefined) return undefined;
        Object.assign(driverFields, fields);
      }
      return { driverFields };
    }
    default:
      return undefined;
  }
}
