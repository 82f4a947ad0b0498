import { isComputeError, type SqlExecutor } from '@better-compute/core';
import { getNode, setNodeHostSection } from '@better-compute/core/nodes';
import type { WorkflowError } from '../engine/workflow-rows';
import { resolveHostSection } from './resolve';
import type { ConfigUnitRegistry, HostSection } from './types';

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
 * Resolves a succeeded workflow's `hostConfig` on the node's labels as they are now, locking the node row in the
 * caller's transaction: the `host` section to set, the workflow error to end with instead (it does not resolve, or a
 * unit schema is broken), or null when the node no longer exists.
 *
 * @example
 * ```ts
 * const resolved = await resolveHostConfig(tx, env.configUnits, nodeId, workflow.document.hostConfig);
 * ```
 */
export async function resolveHostConfig(
  tx: SqlExecutor,
  units: ConfigUnitRegistry,
  nodeId: string,
  hostConfig: unknown,
): Promise<{ host: HostSection } | { error: HostConfigWorkflowError } | null> {
  const node = await getNode(tx, nodeId, { forUpdate: true });
  if (!node) return null;
  try {
    return { host: await resolveHostSection(units, hostConfig, node.labels ?? {}) };
  } catch (error) {
    if (!isComputeError(error)) throw error;
    const { path, issues } = error.details;
    return {
      error: {
        code: error.code,
        message: error.message.startsWith('hostConfig') ? error.message : `hostConfig: ${error.message}`,
        stepId: HOST_CONFIG_ERROR_STEP,
        action: HOST_CONFIG_ERROR_STEP,
        ...(path ? { path: [...path] } : {}),
        ...(issues
          ? { issues: issues.slice(0, MAX_ISSUES).map((i) => ({ path: [...i.path], message: i.message })) }
          : {}),
      },
    };
  }
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
  const resolved = await resolveHostConfig(tx, units, nodeId, hostConfig);
  if (!resolved) return undefined;
  if ('error' in resolved) return resolved.error;
  await setNodeHostSection(tx, nodeId, resolved.host, now);
  return undefined;
}
