import type { Command, ComputeError, Json, Labels, NewCommand, NewEvent } from '@better-compute/core';
import type { ConnectedSiteAgent, StagedWrite } from '@better-compute/core/kernel';
import type { HostSection } from '../config-units/types';
import type { WorkflowEventType } from './events';
import { workflowEvent } from './events';
import type {
  InFlightCommand,
  LoadedWorkflow,
  StepChange,
  StepRecord,
  WorkflowError,
  WorkflowRecord,
} from './workflow-rows';

/** The workflow fields a transition may change. */
export type WorkflowChange = Partial<
  Pick<WorkflowRecord, 'state' | 'error' | 'startedAt' | 'finishedAt' | 'cancelReason'>
>;

/** What a transition decided, for one place to write (see `commitPlan`). It holds no SQL. */
export interface Plan {
  /** The workflow as it ends up; written when `workflowChanged`. */
  readonly workflow: WorkflowRecord;
  readonly workflowChanged: boolean;
  /**
   * Whether the plan decided on the node's labels (a `when`): only then does its write check that they are still the
   * labels it read. A plan that read none stays right whatever a step run wrote to them meanwhile.
   */
  readonly readsLabels: boolean;
  /** Every changed step as it ends up, by step id. */
  readonly steps: ReadonlyMap<string, StepRecord>;
  /** The events, in order. */
  readonly events: readonly NewEvent[];
  /** At most one command to send; the step `stepId` records its id. */
  readonly command?: { readonly input: NewCommand; readonly stepId: string };
  /**
   * Commands to cancel if they are still open: one by id, or every command a step of the workflow sent (`stepId`: a
   * control-plane step's relayed commands, which the step row does not record).
   */
  readonly cancels: readonly PlanCancel[];
  /** The owner's work item to queue. */
  readonly owner?: { readonly kind: string; readonly key: string };
  /** The NodeSpec `host` section to set (and the node's generation to bump). */
  readonly hostConfig?: { readonly nodeId: string; readonly host: HostSection };
  /** What a settled run asked to write with its result (`ctx.writeWithResult`), written by the plan's statement. */
  readonly with?: readonly StagedWrite[];
  /**
   * The agent session a transition decided on as the worker's claim read it, after a control-plane step ran in the
   * pass (a rejoin's baseline, say): the plan's statement writes only while it is still the node's current session.
   */
  readonly sessionCheck?: SessionCheck;
}

/** A node's agent session as a plan decided on it (null: none connected). */
export interface SessionCheck {
  readonly nodeId: string;
  readonly session: { readonly bootId: string | null; readonly role: string | null } | null;
}

/** A command a plan cancels if it is still open, or every open command a step of the workflow sent. */
export type PlanCancel =
  | { readonly commandId: string; readonly reason: string }
  | { readonly stepId: string; readonly reason: string };

/**
 * What a transition still needs to know before it can decide: a site agent, an agent session or a driver target's
 * fields are read before the plan's guarded statement; a command or the host config in a transaction with the
 * workflow locked.
 */
export type Need =
  /** `siteId`: the node's site as the workflow was read with it (no site: none to read; unset: read the node). */
  | { readonly kind: 'site-agent'; readonly nodeId: string; readonly siteId?: string | null }
  | { readonly kind: 'command'; readonly commandId: string }
  | { readonly kind: 'agent-session'; readonly nodeId: string }
  | { readonly kind: 'host-config'; readonly nodeId: string; readonly hostConfig: unknown }
  | { readonly kind: 'driver-target'; readonly nodeId: string };

/** What was read for a transition's {@link Need}s (and how sending its command went). */
export interface Known {
  /** The site agent a site step's command goes to (null: none connected). */
  siteAgent?: Pick<ConnectedSiteAgent, 'nodeId'> | null;
  command?: Command | InFlightCommand | null;
  session?: { bootId: string | null; role: string | null } | null;
  /** The host section resolved on the node's labels, its error, or `null` when the node is gone. */
  hostConfig?: { host: HostSection } | { error: WorkflowError } | null;
  /** What the modules' driver targets add to a driver operation's payload for the node (`{}` for nothing). */
  driverFields?: { readonly [field: string]: Json };
  /** The command queue refused the plan's command. */
  sendRefused?: ComputeError;
}

/**
 * A plan being made: a private copy of the snapshot that a transition changes in memory, and the record of what
 * changed. Nothing here reaches the database; {@link PlanDraft.plan} hands the result over.
 *
 * @example
 * ```ts
 * const draft = new PlanDraft(snapshot);
 * draft.updateWorkflow({ state: 'running', startedAt: now }, now);
 * draft.event('workflow.started');
 * const plan = draft.plan();
 * ```
 */
export class PlanDraft {
  readonly workflow: WorkflowRecord;
  readonly steps: StepRecord[];
  readonly inFlightCommand: InFlightCommand | undefined;
  private readonly changed = new Map<string, StepRecord>();
  private workflowChanged = false;
  private labelsRead = false;
  private readonly events: NewEvent[] = [];
  private command: Plan['command'];
  private readonly cancels: PlanCancel[] = [];
  private owner: Plan['owner'];
  private hostConfig: Plan['hostConfig'];

  constructor(snapshot: LoadedWorkflow) {
    this.workflow = { ...snapshot.workflow };
    this.steps = snapshot.steps.map((step) => ({ ...step }));
    this.inFlightCommand = snapshot.inFlightCommand;
  }

  /** Changes a step of this draft (one of `steps`). */
  updateStep(step: StepRecord, change: StepChange): void {
    Object.assign(step, change);
    this.changed.set(step.stepId, step);
  }

  /** Changes the workflow. */
  updateWorkflow(change: WorkflowChange, now: Date): void {
    Object.assign(this.workflow, change, { updatedAt: now });
    this.workflowChanged = true;
  }

  /** The node's labels as the snapshot has them (none without a node), for a `when`; the plan's write checks them. */
  nodeLabels(): Labels {
    this.labelsRead = true;
    return this.workflow.node?.labels ?? {};
  }

  /** Adds a workflow event (see `workflowEvent`). */
  event(type: WorkflowEventType, extra: { [key: string]: Json } = {}): void {
    this.events.push(workflowEvent(this.workflow, type, extra));
  }

  /** Sends a command; `stepId` records its id. One per plan. */
  send(stepId: string, input: NewCommand): void {
    if (this.command) throw new Error('one transition sends at most one command');
    this.command = { input, stepId };
  }

  /** Cancels a command if it is still open. */
  cancelCommand(commandId: string, reason: string): void {
    this.cancels.push({ commandId, reason });
  }

  /** Cancels every command step `stepId` of this workflow sent that is still open, when the plan is written. */
  cancelCommandsOf(stepId: string, reason: string): void {
    this.cancels.push({ stepId, reason });
  }

  /** Queues the owner's work item. */
  queueOwner(kind: string, key: string): void {
    this.owner = { kind, key };
  }

  /** Sets the node's NodeSpec `host` section. */
  setHostConfig(nodeId: string, host: HostSection): void {
    this.hostConfig = { nodeId, host };
  }

  /** The plan made so far. */
  plan(): Plan {
    return {
      workflow: this.workflow,
      workflowChanged: this.workflowChanged,
      readsLabels: this.labelsRead,
      steps: this.changed,
      events: this.events,
      cancels: this.cancels,
      ...(this.command ? { command: this.command } : {}),
      ...(this.owner ? { owner: this.owner } : {}),
      ...(this.hostConfig ? { hostConfig: this.hostConfig } : {}),
    };
  }

  /** The snapshot as this draft leaves it (for the next transition). */
  snapshot(): LoadedWorkflow {
    return {
      workflow: this.workflow,
      steps: this.steps,
      ...(this.inFlightCommand ? { inFlightCommand: this.inFlightCommand } : {}),
    };
  }
}

/**
 * An empty plan for `workflow`.
 *
 * @example
 * ```ts
 * let acc = emptyPlan(snapshot.workflow);
 * ```
 */
export function emptyPlan(workflow: WorkflowRecord): Plan {
  return { workflow, workflowChanged: false, readsLabels: false, steps: new Map(), events: [], cancels: [] };
}

/**
 * Two plans one after the other as one: `next`'s workflow and steps win, events follow in order.
 *
 * @example
 * ```ts
 * acc = mergePlans(acc, outcome.plan);
 * ```
 */
export function mergePlans(first: Plan, next: Plan): Plan {
  if (first.command && next.command) throw new Error('one plan sends at most one command');
  const steps = new Map(first.steps);
  for (const [id, step] of next.steps) steps.set(id, step);
  const command = next.command ?? first.command;
  const owner = next.owner ?? first.owner;
  const hostConfig = next.hostConfig ?? first.hostConfig;
  const withWrites = [...(first.with ?? []), ...(next.with ?? [])];
  const sessionCheck = next.sessionCheck ?? first.sessionCheck;
  return {
    workflow: next.workflow,
    workflowChanged: first.workflowChanged || next.workflowChanged,
    readsLabels: first.readsLabels || next.readsLabels,
    steps,
    events: [...first.events, ...next.events],
    cancels: [...first.cancels, ...next.cancels],
    ...(command ? { command } : {}),
    ...(owner ? { owner } : {}),
    ...(hostConfig ? { hostConfig } : {}),
    ...(withWrites.length > 0 ? { with: withWrites } : {}),
    ...(sessionCheck ? { sessionCheck } : {}),
  };
}

/**
 * Whether a plan changes nothing.
 *
 * @example
 * ```ts
 * if (isEmptyPlan(plan)) return decision;
 * ```
 */
export function isEmptyPlan(plan: Plan): boolean {
  return (
    !plan.workflowChanged &&
    plan.steps.size === 0 &&
    plan.events.length === 0 &&
    !plan.command &&
    plan.cancels.length === 0 &&
    !plan.owner &&
    !plan.hostConfig &&
    !plan.with?.length
  );
}
