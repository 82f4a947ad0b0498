import { cell, colorState, formatDuration, keyValues, table } from '../output';
import type { Handler } from '../runtime';
import { printPage, readPages, workflowNode } from './shared';
import type { WorkflowView } from './watch';

interface WorkflowSummary {
  id: string;
  nodeId: string | null;
  profileId: string;
  profileVersion: number;
  state: string;
  stepId: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  error: { code?: string; message?: string } | null;
}

function took(w: { startedAt: string | null; finishedAt: string | null }): string {
  if (!w.startedAt) return '-';
  return formatDuration((w.finishedAt ? Date.parse(w.finishedAt) : Date.now()) - Date.parse(w.startedAt));
}

export const list: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const page = await readPages<WorkflowSummary>(client, 'workflows.list', { nodeId: opts.node }, opts);
  const { c } = rt.out;
  printPage(
    rt.out,
    page,
    (w) => w.id,
    () =>
      table(
        ['workflow', 'profile', 'state', 'step', 'created', 'took'],
        page.items.map((w) => [
          w.id,
          `${w.profileId} v${w.profileVersion}`,
          colorState(w.state, c),
          cell(w.stepId),
          w.createdAt,
          took(w),
        ]),
        c,
      ),
    'no workflows',
  );
  return 0;
};

export const get: Handler = async (rt, args, opts) => {
  const client = await rt.client();
  const workflowId = args[0] as string;
  const nodeId = await workflowNode(client, workflowId, opts.node);
  const w = await client.call<WorkflowView>('workflows.get', { nodeId, workflowId });
  const { out } = rt;
  if (out.json) out.printJson(w);
  else if (out.quiet) out.out(w.id);
  else {
    const { c } = out;
    out.out(
      keyValues(
        [
          ['workflow', w.id],
          ['profile', `${w.profileId} v${w.profileVersion}`],
          ['node', cell(w.nodeId)],
          ['state', colorState(w.state, c)],
          ['step', cell(w.stepId)],
          ['created', w.createdAt],
          ['took', took(w)],
          ...(w.error
            ? [['error', c.red(`${w.error.code ?? ''} ${w.error.message ?? ''}`.trim())] as [string, string]]
            : []),
        ],
        c,
      ),
    );
    out.out('');
    out.out(
      w.steps.length === 0
        ? 'no steps started yet'
        : table(
            ['step', 'action', 'runs on', 'state', 'attempt', 'took', 'error'],
            w.steps.map((s) => [
              s.stepId,
              s.action,
              s.runsOn,
              colorState(s.state, c),
              String(s.attempt + 1),
              took(s),
              s.error ? `${s.error.code ?? ''} ${s.error.message ?? ''}`.trim() : '-',
            ]),
            c,
          ),
    );
  }
  return 0;
};

export const watch: Handler = async (rt, args, opts) => {
  const client = await rt.client();
  const workflowId = args[0] as string;
  const nodeId = await workflowNode(client, workflowId, opts.node);
  const { watchWorkflow } = await import('./watch');
  return watchWorkflow(client, rt.out, { workflowId, nodeId });
};

function verb(method: string, extra: (opts: Record<string, unknown>) => Record<string, unknown> = () => ({})): Handler {
  return async (rt, args, opts) => {
    const client = await rt.client();
    const workflowId = args[0] as string;
    const nodeId = await workflowNode(client, workflowId, opts.node);
    const answer = await client.call<WorkflowSummary>(method, { nodeId, workflowId, ...extra(opts) });
    const wait = opts.wait === true;
    if (rt.out.json && !wait) rt.out.printJson(answer);
    else if (rt.out.json) process.stdout.write(`${JSON.stringify(answer)}\n`);
    else if (rt.out.quiet) rt.out.out(answer?.id ?? workflowId);
    else rt.out.out(`${workflowId} ${colorState(answer?.state ?? 'done', rt.out.c)}`);
    if (!wait) return 0;
    const { watchWorkflow } = await import('./watch');
    return watchWorkflow(client, rt.out, { workflowId, nodeId });
  };
}

export const abort = verb('workflows.abort', (opts) => ({ reason: opts.reason }));
export const retry = verb('workflows.retry', (opts) => ({ fromStep: opts.fromStep }));
export const pause = verb('workflows.pause');
export const resume = verb('workflows.resume');
