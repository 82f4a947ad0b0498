import {
  ComputeError,
  isComputeError,
  isSqlError,
  type Json,
  type ModuleContext,
  type SqlError,
  validateInput,
} from '@better-compute/core';
import { checkJson } from '@better-compute/core/checks';
import type { StagedWrite } from '@better-compute/core/kernel';
import type { StepPreloads } from '../define/types';
import { stepDeadlines } from './deadline-watch';
import type { RunRequest } from './decision';
import type { RunGate } from './run-gate';
import { buildStepContext } from './step-context';
import { isStepNotReady } from './step-not-ready';
import type { StepRegistry } from './step-registry';
import type { StepError } from './workflow-rows';

/** How one run of a control-plane step ended. */
export type RunOutcome =
  /** `with`: what the run asked to write with its result (`ctx.writeWithResult`), in order. */
  | { kind: 'succeeded'; result: Json; with?: readonly StagedWrite[] }
  | { kind: 'not-ready'; ms: number }
  | { kind: 'failed'; error: StepError }
  /** The worker began to stop while the step ran: nothing is settled, and the next owner runs it again. */
  | { kind: 'abandoned' }
  /**
   * The run met a database error the kernel calls retryable (a lost connection, a serialization failure, a deadlock):
   * nothing is settled and no attempt is spent; the step runs again after `ms`, never past its deadline.
   */
  | { kind: 'transient'; ms: number; reason: SqlError['reason'] };

// A wrapper may keep the database's error as its cause (toComputeError does): look a few levels down, and stop at a
// ComputeError with a code of its own, which the step chose to report.
const CAUSE_DEPTH = 5;

/**
 * The retryable SQL error behind what a step threw, if that is all it was.
 *
 * @example
 * ```ts
 * transientSqlError(new ComputeError('INTERNAL', 'x', { cause: sqlError })); // sqlError, when it is retryable
 * ```
 */
export function transientSqlError(error: unknown): SqlError | undefined {
  let current = error;
  for (let depth = 0; depth < CAUSE_DEPTH && current !== undefined && current !== null; depth += 1) {
    if (isSqlError(current)) return current.retryable ? current : undefined;
    if (isComputeError(current) && current.code !== 'INTERNAL') return undefined;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? code : undefined;
}

function failure(error: unknown, ctx: ModuleContext, request: RunRequest): RunOutcome {
  if (isComputeError(error)) {
    const reason = typeof error.details.reason === 'string' ? { reason: error.details.reason } : {};
    return { kind: 'failed', error: { code: error.code, message: error.message, ...reason } };
  }
  // An unknown throw's message may carry anything (a secret, a connection string): it is not copied.
  ctx.log.error('step threw a non-ComputeError', {
    workflowId: request.workflowId,
    stepId: request.stepId,
    action: request.action,
    errorName: error instanceof Error ? error.name : typeof error,
    // A database error's class and SQLSTATE say what went wrong without quoting any value.
    ...(isSqlError(error) ? { sqlReason: error.reason, sqlState: error.sqlState ?? null } : {}),
    // A library's error code (ERR_STREAM_DESTROYED, CONNECTION_ENDED) names the failure without quoting a value.
    ...(codeOf(error) ? { errorCode: codeOf(error) } : {}),
  });
  return { kind: 'failed', error: { code: 'INTERNAL', message: 'the step failed with an unexpected error' } };
}

/**
 * Runs a control-plane step outside any transaction: checks it is registered here and its input still passes, then
 * calls `run` with its context and an AbortSignal aborted at the deadline. A step that throws `stepNotReady(ms)` asks
 * to run again; a result must be JSON.
 *
 * @example
 * ```ts
 * const outcome = await runControlPlaneStep(ctx, engine.steps, request);
 * ```
 */
export async function runControlPlaneStep(
  ctx: ModuleContext,
  steps: StepRegistry,
  request: RunRequest,
  transientDelayMs: (reason: SqlError['reason']) => number = () => 1_000,
  gate?: RunGate,
  preloads?: StepPreloads,
): Promise<RunOutcome> {
  const definition = steps.get(request.action);
  if (definition?.runsOn !== 'control-plane') {
    const error = {
      code: 'INVALID_CONFIG' as const,
      message: `step ${request.action} is not registered in this worker`,
    };
    return { kind: 'failed', error };
  }
  const controller = new AbortController();
  const remaining = request.deadline.getTime() - ctx.clock.now().getTime();
  const unwatch = stepDeadlines.watch(Date.now() + remaining, () =>
    controller.abort(new ComputeError('TIMEOUT', 'the step deadline passed')),
  );
  const stopping = ctx.signal;
  // The worker's stop reaches the run through a listener removed when the run ends: AbortSignal.any would leave a
  // WeakRef per run on the worker's long-lived signal for good (Node 20).
  const onStop = () => controller.abort(stopping?.reason);
  if (stopping?.aborted) onStop();
  else stopping?.addEventListener('abort', onStop, { once: true });
  const signal = controller.signal;
  // A run that ignores its signal must not hold the workflow's key past its deadline or a stopping worker: the engine
  // stops waiting for it then, and its context refuses to send anything more (see buildStepContext).
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    const input = await validateInput(definition.input, request.spec.with ?? {}, ['with']);
    const withResult: StagedWrite[] = [];
    const stepCtx = buildStepContext(ctx, request, definition.sends, signal, gate, preloads, withResult);
    const value = (await Promise.race([definition.run(input, stepCtx), aborted])) ?? null;
    const problem = checkJson(value, ['result']);
    if (problem) {
      return {
        kind: 'failed',
        error: { code: 'INTERNAL', message: `the step returned a non-JSON result: ${problem.message}` },
      };
    }
    return { kind: 'succeeded', result: value as Json, ...(withResult.length > 0 ? { with: withResult } : {}) };
  } catch (error) {
    if (isStepNotReady(error)) return { kind: 'not-ready', ms: error.ms };
    if (stopping?.aborted) return { kind: 'abandoned' };
    if (ctx.clock.now().getTime() >= request.deadline.getTime()) {
      return { kind: 'failed', error: { code: 'TIMEOUT', message: 'no result before the step deadline' } };
    }
    const transient = transientSqlError(error);
    if (transient) {
      const ms = transientDelayMs(transient.reason);
      // The reason only: a database's message can quote the values of a row.
      ctx.log.warn('step met a transient database error; running it again', {
        workflowId: request.workflowId,
        stepId: request.stepId,
        action: request.action,
        reason: transient.reason,
        retryInMs: ms,
      });
      return { kind: 'transient', ms, reason: transient.reason };
    }
    return failure(error, ctx, request);
  } finally {
    // A run the engine stopped waiting for writes nothing it held (it may go on in the background).
    if (signal.aborted) gate?.close();
    unwatch();
    stopping?.removeEventListener('abort', onStop);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}
