import type { ApiClient } from '../client';
import { EXIT } from '../errors';
import { colorState, formatDuration, type Output, visibleWidth } from '../output';
import { type StreamEvent, streamEvents } from '../sse';

/** A step row as `workflows.get` answers it. */
interface StepRow {
  stepId: string;
  phase: string;
  action: string;
  name: string | null;
  runsOn: string;
  state: string;
  attempt: number;
  startedAt: string | null;
  finishedAt: string | null;
  error: { code?: string; message?: string } | null;
}

/** `workflows.get`'s answer. */
export interface WorkflowView {
  id: string;
  nodeId: string | null;
  profileId: string;
  profileVersion: number;
  state: string;
  stepId: string | null;
  error: { code?: string; message?: string } | null;
  startedAt: string | null;
  finishedAt: string | null;
  createdAt: string;
  steps: StepRow[];
}

interface PlanStep {
  stepId: string;
  phase: string;
  name: string | null;
  action: string;
  runsOn: string;
  willRun: boolean | null;
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** The exit code of a workflow that ended: 0 succeeded, 8 failed, 9 cancelled. */
export function workflowExitCode(state: string): number {
  if (state === 'succeeded') return EXIT.OK;
  if (state === 'cancelled') return EXIT.WORKFLOW_CANCELLED;
  return EXIT.WORKFLOW_FAILED;
}

function elapsed(from: string | null, to: string | null, now: number): string {
  if (!from) return '';
  return formatDuration((to ? Date.parse(to) : now) - Date.parse(from));
}

/** The lines of the timeline: the workflow, then each step of the plan with its state, attempt and time. */
export function renderTimeline(
  workflow: WorkflowView,
  plan: readonly PlanStep[],
  out: Pick<Output, 'c'>,
  frame: number,
  now = Date.now(),
): string[] {
  const { c } = out;
  const rows = new Map(workflow.steps.map((step) => [step.stepId, step]));
  const order: { stepId: string; label: string; row: StepRow | undefined; willRun: boolean | null }[] = [];
  for (const step of plan) {
    // Failure and cleanup steps only show once they run.
    if (step.phase !== 'main' && !rows.has(step.stepId)) continue;
    order.push({
      stepId: step.stepId,
      label: step.name ?? step.action,
      row: rows.get(step.stepId),
      willRun: step.willRun,
    });
  }
  for (const row of workflow.steps) {
    if (!order.some((o) => o.stepId === row.stepId)) {
      order.push({ stepId: row.stepId, label: row.name ?? row.action, row, willRun: null });
    }
  }
  const spin = SPINNER[frame % SPINNER.length] as string;
  const idWidth = Math.max(4, ...order.map((o) => o.stepId.length));
  const labelWidth = Math.min(48, Math.max(4, ...order.map((o) => o.label.length)));
  const lines = [
    `${c.bold(workflow.profileId)} v${workflow.profileVersion}  ${workflow.id}  node ${workflow.nodeId ?? '-'}  ${
      TERMINAL.has(workflow.state) ? '' : `${c.cyan(spin)} `
    }${colorState(workflow.state, c)}  ${elapsed(workflow.startedAt ?? workflow.createdAt, workflow.finishedAt, now)}`,
  ];
  for (const item of order) {
    const state = item.row?.state ?? (item.willRun === false ? 'skipped' : 'pending');
    const icon =
      state === 'succeeded'
        ? c.green('✓')
        : state === 'failed'
          ? c.red('✗')
          : state === 'running' || state === 'waiting'
            ? c.cyan(spin)
            : state === 'skipped' || state === 'cancelled'
              ? c.dim('-')
              : c.dim('·');
    const label = item.label.length > labelWidth ? `${item.label.slice(0, labelWidth - 1)}…` : item.label;
    const parts = [
      `  ${icon} ${item.stepId.padEnd(idWidth)}  ${label.padEnd(labelWidth)}  ${colorState(state, c).padEnd(
        9 + (colorState(state, c).length - state.length),
      )}`,
    ];
    if (item.row && item.row.state !== 'pending') {
      parts.push(`attempt ${item.row.attempt + 1}`);
      parts.push(elapsed(item.row.startedAt, item.row.finishedAt, now));
    }
    if (item.row?.error?.message) parts.push(c.red(`${item.row.error.code ?? ''} ${item.row.error.message}`.trim()));
    lines.push(parts.join('  ').trimEnd());
  }
  if (TERMINAL.has(workflow.state) && workflow.error?.message) {
    lines.push(c.red(`  ${workflow.error.code ?? 'error'}: ${workflow.error.message}`));
  }
  return lines;
}

function eventKey(type: string, stepId: unknown, attempt: unknown): string {
  return `${type} ${String(stepId)} ${String(attempt)}`;
}

/** The step events a workflow's rows already tell (started, and how each ended), in time order. */
function historyLines(workflow: WorkflowView): { key: string; text: string }[] {
  const lines: { at: string; key: string; text: string }[] = [];
  for (const step of workflow.steps) {
    const parts = [step.stepId, step.action, `attempt ${step.attempt + 1}`];
    if (step.startedAt) {
      const type = 'workflow.step.started';
      lines.push({
        at: step.startedAt,
        key: eventKey(type, step.stepId, step.attempt),
        text: [step.startedAt, type, ...parts].join('  '),
      });
    }
    if (step.finishedAt && ['succeeded', 'failed', 'skipped'].includes(step.state)) {
      const type = `workflow.step.${step.state}`;
      const error = step.error?.message ? [`${step.error.code ?? 'error'}: ${step.error.message}`] : [];
      lines.push({
        at: step.finishedAt,
        key: eventKey(type, step.stepId, step.attempt),
        text: [step.finishedAt, type, ...parts, ...error].join('  '),
      });
    }
  }
  return lines.sort((a, b) => a.at.localeCompare(b.at));
}

/** One line for an event, as printed without a terminal. */
export function eventLine(event: StreamEvent): string {
  const d = event.data;
  const parts = [event.at, event.type];
  if (typeof d.stepId === 'string') parts.push(d.stepId);
  if (typeof d.action === 'string') parts.push(d.action);
  if (typeof d.attempt === 'number') parts.push(`attempt ${d.attempt + 1}`);
  if (typeof d.state === 'string') parts.push(d.state);
  const error = d.error as { code?: string; message?: string } | undefined;
  if (error && typeof error === 'object' && error.message) parts.push(`${error.code ?? 'error'}: ${error.message}`);
  else if (typeof d.reason === 'string') parts.push(d.reason);
  return parts.join('  ');
}

/**
 * Follows a workflow until it ends and returns its exit code. On a terminal: a live timeline (each step's state,
 * attempt, elapsed time, a spinner on the step in flight) redrawn on every event; otherwise one line per event; with
 * `--json` one JSON line per event, then the final `workflows.get` answer.
 */
export async function watchWorkflow(
  client: ApiClient,
  out: Output,
  target: { workflowId: string; nodeId: string },
): Promise<number> {
  const abort = new AbortController();
  let opened!: () => void;
  const open = new Promise<void>((resolve) => {
    opened = resolve;
  });
  const stream = streamEvents(client, {
    subject: `workflow/${target.workflowId}`,
    tenantId: client.tenant,
    signal: abort.signal,
    onOpen: () => opened(),
  });
  const get = () =>
    client.call<WorkflowView>('workflows.get', { nodeId: target.nodeId, workflowId: target.workflowId });
  // The stream's start point is fixed before the first read, so no event falls between the two.
  const first = stream.next();
  await Promise.race([open, first.then(() => undefined)]);
  let workflow = await get();
  let plan: PlanStep[] = [];
  try {
    const rendering = await client.call<{ steps: PlanStep[] }>('profiles.render', {
      profileId: workflow.profileId,
      version: workflow.profileVersion,
      ...(workflow.nodeId ? { nodeId: workflow.nodeId } : {}),
    });
    plan = rendering.steps;
  } catch {
    plan = [];
  }

  const live = out.tty && !out.json;
  /** Events already told (from the steps' history): `type stepId attempt`. */
  const printed = new Set<string>();
  let frame = 0;
  let drawn = 0;
  const columns = () => process.stdout.columns || 120;
  const draw = () => {
    const lines = renderTimeline(workflow, plan, out, frame).map((line) => clip(line, columns()));
    let text = drawn > 0 ? `\u001b[${drawn}A` : '';
    for (const line of lines) text += `\u001b[2K${line}\n`;
    // A shorter timeline than the last one: clear the lines left below.
    for (let i = lines.length; i < drawn; i += 1) text += '\u001b[2K\n';
    if (drawn > lines.length) text += `\u001b[${drawn - lines.length}A`;
    drawn = lines.length;
    process.stdout.write(text);
  };
  let timer: NodeJS.Timeout | undefined;
  let poller: NodeJS.Timeout | undefined;
  const restore = () => process.stdout.write('\u001b[?25h');
  if (live) {
    process.stdout.write('\u001b[?25l');
    process.once('exit', restore);
    draw();
    timer = setInterval(() => {
      frame += 1;
      draw();
    }, 100);
  } else if (!out.json) {
    out.out(
      `watching ${workflow.id} (${workflow.profileId} v${workflow.profileVersion} on ${workflow.nodeId ?? '-'}): ${workflow.state}`,
    );
    // What happened before the stream opened, from the workflow's steps, so the lines tell the whole story.
    for (const line of historyLines(workflow)) {
      printed.add(line.key);
      out.out(line.text);
    }
  }

  let refreshing: Promise<void> | undefined;
  const refresh = () => {
    refreshing ??= get()
      .then((next) => {
        workflow = next;
      })
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };
  // Events are the clock; a slow poll covers a stream that reconnects.
  poller = setInterval(() => {
    if (TERMINAL.has(workflow.state)) abort.abort();
    else void refresh().catch(() => undefined);
  }, 5_000);

  try {
    if (!TERMINAL.has(workflow.state)) {
      let next = first;
      for (;;) {
        const item = await next;
        if (item.done) break;
        const event = item.value;
        if (out.json) process.stdout.write(`${JSON.stringify(event)}\n`);
        else if (!live && !printed.has(eventKey(event.type, event.data.stepId, event.data.attempt))) {
          out.out(eventLine(event));
        }
        await refresh();
        if (live) draw();
        if (TERMINAL.has(workflow.state) || /^workflow\.(succeeded|failed|cancelled)$/.test(event.type)) {
          if (!TERMINAL.has(workflow.state)) await refresh();
          if (TERMINAL.has(workflow.state)) break;
        }
        next = stream.next();
      }
    }
  } finally {
    abort.abort();
    clearInterval(poller);
    if (timer) clearInterval(timer);
    void stream.return(undefined);
  }
  if (live) {
    draw();
    restore();
    process.removeListener('exit', restore);
  }
  const took = elapsed(workflow.startedAt ?? workflow.createdAt, workflow.finishedAt, Date.now());
  if (out.json) process.stdout.write(`${JSON.stringify(workflow)}\n`);
  else {
    const detail = workflow.error?.message ? `: ${workflow.error.code ?? 'error'} ${workflow.error.message}` : '';
    out.out(`workflow ${workflow.id} ${colorState(workflow.state, out.c)}${took ? ` in ${took}` : ''}${detail}`);
  }
  return workflowExitCode(workflow.state);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching ANSI escapes is the point
const ANSI_AT_START = /^\u001b\[[0-9;]*m/;

function clip(line: string, width: number): string {
  if (visibleWidth(line) <= width) return line;
  // Cut by visible characters, keeping escape sequences, and reset the colour after the cut.
  let visible = 0;
  let result = '';
  for (let i = 0; i < line.length; ) {
    const sequence = ANSI_AT_START.exec(line.slice(i));
    if (sequence) {
      result += sequence[0];
      i += sequence[0].length;
      continue;
    }
    const char = String.fromCodePoint(line.codePointAt(i) as number);
    if (visible >= width - 1) break;
    result += char;
    visible += 1;
    i += char.length;
  }
  return `${result}\u001b[0m`;
}
