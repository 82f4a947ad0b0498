import {
  type CommandKindRegistry,
  ComputeError,
  type ComputeErrorIssue,
  type ErrorPath,
  isComputeError,
  parseDuration,
  validateInput,
} from '@better-compute/core';
import { hostConfigIssues } from '../config-units/resolve';
import type { ConfigUnitRegistry } from '../config-units/types';
import {
  type AgentPlace,
  DRIVER_CONCERNS,
  MAX_WORKFLOW_STEPS,
  type Profile,
  type ProfileStep,
  type Step,
  type StepRunsOn,
} from '../define/types';
import { ENGINE_DEFAULTS, type StepPhase } from './constants';
import type { StepRegistry } from './step-registry';

/** One `workflow_steps` row as expansion makes it. */
export interface ExpandedStep {
  stepId: string;
  position: number;
  phase: StepPhase;
  parentStepId: string | null;
  /** What `use` (or `fallback`) resolved to: the step id or the driver operation. */
  action: string;
  resolution: 'step' | 'driver';
  runsOn: StepRunsOn;
  spec: ProfileStep;
  timeoutMs: number;
  retries: number;
  onFailure: 'fail' | 'continue' | 'rescue' | 'step';
  awaitRejoin: boolean;
  /** The command an agent step or a driver operation sends. */
  commandKind: string | null;
}

/** A profile expanded for a workflow: its rows and every command kind it can send. */
export interface Expansion {
  steps: ExpandedStep[];
  commandKinds: string[];
}

/** What expansion resolves against. */
export interface ExpandContext {
  steps: StepRegistry;
  commandKinds: CommandKindRegistry;
  /** With it, the profile's `hostConfig` is checked too: unknown units and invalid settings join the issues. */
  configUnits?: ConfigUnitRegistry;
}

/**
 * The command kind a driver operation is sent as.
 *
 * @example
 * ```ts
 * commands.findByKey(sql, siteAgentId, key).then((c) => c?.kind === DRIVER_INVOKE_KIND);
 * ```
 */
export const DRIVER_INVOKE_KIND = 'driver.invoke';

const AGENTS: readonly StepRunsOn[] = ['site', 'node', 'ramdisk'];
const DRIVER_OPERATION = /^([a-z][a-z-]*)\.([a-zA-Z][a-zA-Z0-9-]*)$/;

type Resolved =
  | { resolution: 'step'; action: string; runsOn: StepRunsOn; step: Step }
  | { resolution: 'driver'; action: string; runsOn: AgentPlace; concern: string };

/** Where a use stands, or why it does not resolve. */
function resolveUse(use: string, on: StepRunsOn | undefined, profile: Profile, ctx: ExpandContext): Resolved | string {
  const step = ctx.steps.get(use);
  if (step) {
    const relays = step.runsOn === 'control-plane' ? (step.relays ?? []) : [];
    if (on !== undefined && on !== step.runsOn && !(relays as readonly string[]).includes(on)) {
      const where = relays.length > 0 ? `${step.runsOn} (relaying to ${relays.join(', ')})` : step.runsOn;
      return `step ${use} runs on ${where}, not on ${on}`;
    }
    if (step.runsOn !== 'control-plane' && !ctx.commandKinds.has(step.command)) {
      return `step ${use} sends command kind ${step.command}, which no module registers`;
    }
    return { resolution: 'step', action: use, runsOn: step.runsOn, step };
  }
  const match = DRIVER_OPERATION.exec(use);
  const concern = match?.[1];
  if (concern && (DRIVER_CONCERNS as readonly string[]).includes(concern)) {
    if (on === undefined || !AGENTS.includes(on)) {
      return `${use} is not a registered step; as a driver operation it needs on: site, node or ramdisk`;
    }
    if (!ctx.commandKinds.has(DRIVER_INVOKE_KIND)) {
      return `${use} is a driver operation, but no module registers the ${DRIVER_INVOKE_KIND} command kind`;
    }
    if (profile.drivers?.[concern] === undefined)
      return `${use} is a driver operation, but no driver is bound for ${concern}`;
    return { resolution: 'driver', action: use, runsOn: on as AgentPlace, concern };
  }
  return `${use} is not a registered step or a driver operation`;
}

interface Source {
  spec: ProfileStep;
  path: ErrorPath;
  stepId: string;
  phase: StepPhase;
  parentStepId: string | null;
}

async function expandOne(
  source: Source,
  profile: Profile,
  ctx: ExpandContext,
  issues: ComputeErrorIssue[],
): Promise<{ row: ExpandedStep; resolved: Resolved } | undefined> {
  const { spec, path } = source;
  let resolved = resolveUse(spec.use, spec.on, profile, ctx);
  if (typeof resolved === 'string' && spec.fallback !== undefined) {
    const fallback = resolveUse(spec.fallback, spec.on, profile, ctx);
    resolved = typeof fallback === 'string' ? `${resolved}; fallback: ${fallback}` : fallback;
  }
  if (typeof resolved === 'string') {
    issues.push({ path: [...path, 'use'], message: resolved, code: 'INVALID_INPUT' });
    return undefined;
  }
  if (resolved.resolution === 'step') {
    try {
      await validateInput(resolved.step.input, spec.with ?? {}, [...path, 'with']);
    } catch (error) {
      if (!isComputeError(error, 'INVALID_INPUT')) throw error;
      issues.push(...(error.details.issues ?? [{ path: [...path, 'with'], message: error.message }]));
    }
  }
  const definition = resolved.resolution === 'step' ? resolved.step : undefined;
  const awaitRejoin =
    (spec.await ?? (definition?.runsOn !== 'control-plane' ? definition?.await : undefined)) === 'rejoin';
  if (awaitRejoin && resolved.runsOn === 'control-plane') {
    issues.push({ path: [...path, 'await'], message: `await: 'rejoin' needs an agent step`, code: 'INVALID_INPUT' });
  }
  const commandKind =
    resolved.resolution === 'driver'
      ? DRIVER_INVOKE_KIND
      : resolved.step.runsOn === 'control-plane'
        ? null
        : resolved.step.command;
  const timeoutMs =
    spec.timeout !== undefined
      ? parseDuration(spec.timeout, [...path, 'timeout'])
      : definition
        ? parseDuration(definition.timeout, ['timeout'])
        : ENGINE_DEFAULTS.driverOperationTimeoutMs;
  const onFailure = typeof spec.onFailure === 'object' ? 'step' : (spec.onFailure ?? 'fail');
  return {
    resolved,
    row: {
      stepId: source.stepId,
      position: 0,
      phase: source.phase,
      parentStepId: source.parentStepId,
      action: resolved.action,
      resolution: resolved.resolution,
      runsOn: resolved.runsOn,
      spec,
      timeoutMs,
      retries: spec.retries ?? definition?.retries ?? 0,
      onFailure,
      awaitRejoin,
      commandKind,
    },
  };
}

function kindsOf(resolved: Resolved): readonly string[] {
  if (resolved.resolution === 'driver') return [DRIVER_INVOKE_KIND];
  const step = resolved.step;
  return step.runsOn === 'control-plane' ? (step.sends ?? []) : [step.command];
}

/**
 * Expands a profile into workflow rows in the order they run: the main phase (`steps`, then `acceptance`) as `main.N`,
 * each object `onFailure` as `main.N.on-failure`, then the cleanup phase: each main step definition's own cleanup as
 * `main.N.cleanup.K` (last main step first), then the profile's as `cleanup.K`. Each `use` resolves to a registered step
 * (an `on:` must match its `runsOn` or `relays`), else a driver operation sent as `driver.invoke`, else `fallback`, and
 * `with` is validated against the step's input. With `configUnits`, the `hostConfig` is checked as well (every unit,
 * whatever its `when`). Every problem is collected: INVALID_INPUT with `details.issues`.
 *
 * @example
 * ```ts
 * const { steps, commandKinds } = await expandProfile(profile, { steps: engine.steps, commandKinds: ctx.commandKinds });
 * ```
 */
export async function expandProfile(profile: Profile, ctx: ExpandContext): Promise<Expansion> {
  const issues: ComputeErrorIssue[] = [];
  const main: ExpandedStep[] = [];
  const onFailure: ExpandedStep[] = [];
  const ownCleanup: ExpandedStep[][] = [];
  const kinds = new Set<string>();
  const mainSources = [
    ...(profile.steps ?? []).map((spec, i) => ({ spec, path: ['steps', i] as ErrorPath })),
    ...(profile.acceptance ?? []).map((spec, i) => ({ spec, path: ['acceptance', i] as ErrorPath })),
  ];
  for (const [index, { spec, path }] of mainSources.entries()) {
    const stepId = `main.${index + 1}`;
    const expanded = await expandOne({ spec, path, stepId, phase: 'main', parentStepId: null }, profile, ctx, issues);
    if (!expanded) continue;
    main.push(expanded.row);
    for (const kind of kindsOf(expanded.resolved)) kinds.add(kind);
    if (typeof spec.onFailure === 'object') {
      const source = { spec: spec.onFailure, path: [...path, 'onFailure'], stepId: `${stepId}.on-failure` };
      const handler = await expandOne({ ...source, phase: 'on-failure', parentStepId: stepId }, profile, ctx, issues);
      if (handler) {
        onFailure.push(handler.row);
        for (const kind of kindsOf(handler.resolved)) kinds.add(kind);
      }
    }
    const definitionCleanup = expanded.resolved.resolution === 'step' ? (expanded.resolved.step.cleanup ?? []) : [];
    const rows: ExpandedStep[] = [];
    for (const [k, cleanupSpec] of definitionCleanup.entries()) {
      const source = { spec: cleanupSpec, path: [...path, 'cleanup', k], stepId: `${stepId}.cleanup.${k + 1}` };
      const cleanup = await expandOne({ ...source, phase: 'cleanup', parentStepId: stepId }, profile, ctx, issues);
      if (cleanup) {
        rows.push(cleanup.row);
        for (const kind of kindsOf(cleanup.resolved)) kinds.add(kind);
      }
    }
    ownCleanup.push(rows);
  }
  const profileCleanup: ExpandedStep[] = [];
  for (const [k, spec] of (profile.cleanup ?? []).entries()) {
    const source = { spec, path: ['cleanup', k] as ErrorPath, stepId: `cleanup.${k + 1}`, parentStepId: null };
    const cleanup = await expandOne({ ...source, phase: 'cleanup' }, profile, ctx, issues);
    if (cleanup) {
      profileCleanup.push(cleanup.row);
      for (const kind of kindsOf(cleanup.resolved)) kinds.add(kind);
    }
  }
  const steps = [...main, ...onFailure, ...ownCleanup.reverse().flat(), ...profileCleanup];
  if (steps.length > MAX_WORKFLOW_STEPS) {
    issues.push({
      path: ['steps'],
      message: `a workflow holds at most ${MAX_WORKFLOW_STEPS} steps; this profile expands to ${steps.length}`,
      code: 'INVALID_INPUT',
    });
  }
  if (ctx.configUnits && profile.hostConfig !== undefined) {
    issues.push(...(await hostConfigIssues(ctx.configUnits, profile.hostConfig)));
  }
  if (issues.length > 0) {
    const first = issues[0] as ComputeErrorIssue;
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
    throw new ComputeError(
      'INVALID_INPUT',
      `profile ${profile.id} version ${profile.version} does not resolve: ${first.path.join('.')}: ${first.message}${more}`,
      { details: { path: first.path, issues } },
    );
  }
  steps.forEach((step, i) => {
    step.position = i + 1;
  });
  return { steps, commandKinds: [...kinds].sort() };
}
