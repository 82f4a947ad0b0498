import { isComputeError, type SqlExecutor } from '@better-compute/core';
import { getNode, setNodeHostSection } from '@better-compute/core/nodes';
import type { WorkflowError } from '../engine/workflow-rows';
import { resolveHostSection } from './resolve';
import type { ConfigUnitRegistry } from './types';

/**
 * The `stepId` and `action` a workflow error carries when the workflow's host config did not resolve as it ended:
 * not a step of the workflow, the host-config hook itself.
 *
 * @example
 * ```ts
 * if (wf.error?.stepId === HOST_CONFIG_ERROR_STEP) console.log('fix the hostConfig and retry');
 * ```
 */
export const HOST_CONFIG_ERROR_STEP = 'hostConfig';

// The workflow row keeps the first issues only; the message says how many there were.
const MAX_ISSUES = 20;

/** A workflow error from the host-config hook: INVALID_INPUT with the path and issues of the resolution. */
export interface HostConfigWorkflowError extends WorkflowError {
  path?: readonly (string | number)[];
  issues?: readonly { path: readonly (string | number)[]; message: string }[];
}

/**
 * Sets a node's NodeSpec `host` section from a succeeded workflow's `hostConfig`, resolved on the node's labels as they
 * are now (the node row locked), and bumps its `generation`, in the caller's transaction. Returns the workflow error to
 * end with instead when the host config does not resolve (or a unit schema is broken); the node is then left alone. A
 * node that no longer exists is left alone too.
 *
 * @example
 * ```ts
 * const failure = await applyHostConfig(tx, env.configUnits, workflow.nodeId, workflow.document.hostConfig, now);
 * ```
 */
export async function applyHostConfig(
  tx: SqlExecutor,
  units: ConfigUnitRegistry,
  nodeId: string,
  hostConfig: unknown,
  now: Date,
): Promise<HostConfigWorkflowError | undefined> {
  const node = await getNode(tx, nodeId, { forUpdate: true });
  if (!node) return undefined;
  let host: Awaited<ReturnType<typeof resolveHostSection>>;
  try {
    host = await resolveHostSection(units, hostConfig, node.labels ?? {});
  } catch (error) {
    if (!isComputeError(error)) throw error;
    const { path, issues } = error.details;
    return {
      code: error.code,
      message: error.message.startsWith('hostConfig') ? error.message : `hostConfig: ${error.message}`,
      stepId: HOST_CONFIG_ERROR_STEP,
      action: HOST_CONFIG_ERROR_STEP,
      ...(path ? { path: [...path] } : {}),
      ...(issues
        ? { issues: issues.slice(0, MAX_ISSUES).map((i) => ({ path: [...i.path], message: i.message })) }
        : {}),
    };
  }
  await setNodeHostSection(tx, nodeId, host, now);
  return undefined;
}
