import { CliError, usage } from '../errors';
import { cell, formatDuration, keyValues, table } from '../output';
import type { Handler, Runtime } from '../runtime';
import { printPage, readDocument, readPages } from './shared';

interface ProfileSummary {
  tenantId: string;
  id: string;
  version: number;
  public: boolean;
  used: boolean;
  shadowed: boolean;
  target: string;
  mode: string | null;
  role: string | null;
  description: string | null;
}

export const list: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const page = await readPages<ProfileSummary>(client, 'profiles.list', {}, opts);
  printPage(
    rt.out,
    page,
    (p) => `${p.id}@${p.version}`,
    () =>
      table(
        ['profile', 'version', 'owner', 'target', 'mode', 'public', 'used', 'description'],
        page.items.map((p) => [
          p.id,
          String(p.version),
          p.tenantId,
          p.target,
          cell(p.mode),
          p.public ? 'yes' : 'no',
          p.used ? 'yes' : 'no',
          cell(p.description),
        ]),
        rt.out.c,
      ),
    'no profiles',
  );
  return 0;
};

export const get: Handler = async (rt, args, opts) => {
  const client = await rt.client();
  const answer = await client.call<{
    tenantId: string;
    public: boolean;
    used: boolean;
    profile: Record<string, unknown>;
  }>('profiles.get', { profileId: args[0], version: opts.version });
  if (rt.out.json) rt.out.printJson(answer);
  else if (rt.out.quiet) rt.out.out(`${answer.profile.id}@${answer.profile.version}`);
  else {
    const { stringify } = await import('yaml');
    rt.out.out(
      `${rt.out.c.dim(`# owner ${answer.tenantId}, ${answer.public ? 'public' : 'private'}, ${answer.used ? 'used by a workflow' : 'not used yet'}`)}\n${stringify(answer.profile).trimEnd()}`,
    );
  }
  return 0;
};

async function profileSource(args: unknown[], opts: Record<string, unknown>, command: string) {
  const id = args[0] as string | undefined;
  if (opts.file && id) throw usage(`profiles ${command} takes a profile id or -f, not both`, ['--file']);
  if (opts.file) return { profile: await readDocument(opts.file as string, '--file') };
  if (id) return { profileId: id, version: opts.version };
  throw usage(`profiles ${command} needs a profile id or -f <file>`, ['--file']);
}

export const create: Handler = async (rt, _args, opts) => {
  const profile = await readDocument(opts.file as string, '--file');
  const client = await rt.client();
  const answer = await client.call<{ tenantId: string; profile: { id: string; version: number } }>('profiles.create', {
    profile,
    public: opts.public === true ? true : undefined,
  });
  if (rt.out.json) rt.out.printJson(answer);
  else if (rt.out.quiet) rt.out.out(`${answer.profile.id}@${answer.profile.version}`);
  else rt.out.out(`stored profile ${answer.profile.id} v${answer.profile.version} (tenant ${answer.tenantId})`);
  return 0;
};

interface Issue {
  path: (string | number)[];
  message: string;
  code: string;
}

export const validate: Handler = async (rt, args, opts) => {
  const source = await profileSource(args, opts, 'validate');
  const client = await rt.client();
  const answer = await client.call<{ valid: boolean; issues: Issue[] }>('profiles.validate', source);
  const name = (opts.file as string | undefined) ?? (args[0] as string);
  if (rt.out.json) rt.out.printJson(answer);
  else if (answer.valid) {
    if (!rt.out.quiet) rt.out.out(`${name}: ${rt.out.c.green('valid')}`);
  } else {
    rt.out.out(`${name}: ${rt.out.c.red('invalid')}`);
    for (const issue of answer.issues) rt.out.out(`  ${issue.path.join('.') || '(profile)'}: ${issue.message}`);
  }
  if (!answer.valid) {
    throw new CliError('INVALID_INPUT', `the profile does not resolve (${answer.issues.length} issue(s))`, {
      path: answer.issues[0]?.path ?? [],
    });
  }
  return 0;
};

interface PlanStep {
  stepId: string;
  phase: string;
  parentStepId: string | null;
  name: string | null;
  action: string;
  runsOn: string;
  on: string | null;
  commandKind: string | null;
  timeoutMs: number;
  retries: number;
  onFailure: string;
  await: string | null;
  when: string | null;
  driver: string | null;
  willRun: boolean | null;
}

/** `profiles render`: the plan an operator reads before deploying. */
export const render: Handler = async (rt: Runtime, args, opts) => {
  const source = await profileSource(args, opts, 'render');
  const client = await rt.client();
  const answer = await client.call<{
    profileId: string;
    version: number;
    tenantId: string;
    nodeId: string | null;
    commandKinds: string[];
    steps: PlanStep[];
  }>('profiles.render', { ...source, nodeId: opts.node });
  const { out } = rt;
  if (out.json) out.printJson(answer);
  else if (out.quiet) {
    for (const step of answer.steps) out.out(step.stepId);
  } else {
    const { c } = out;
    out.out(
      keyValues(
        [
          ['profile', `${answer.profileId} v${answer.version} (owner ${answer.tenantId})`],
          [
            'node',
            answer.nodeId ? `${answer.nodeId} (when evaluated on its labels)` : '- (pass --node to evaluate when)',
          ],
          ['commands', answer.commandKinds.join(', ') || '-'],
        ],
        c,
      ),
    );
    out.out('');
    out.out(
      table(
        [
          'step',
          'name',
          'action',
          'runs on',
          'target',
          'driver',
          'when',
          'will run',
          'timeout',
          'retries',
          'on failure',
        ],
        answer.steps.map((s) => [
          s.stepId,
          cell(s.name),
          s.action,
          s.runsOn,
          cell(s.on),
          cell(s.driver),
          cell(s.when),
          s.willRun === null ? '-' : s.willRun ? c.green('yes') : c.yellow('no'),
          formatDuration(s.timeoutMs),
          String(s.retries),
          s.onFailure + (s.await ? `, await ${s.await}` : ''),
        ]),
        c,
      ),
    );
  }
  return 0;
};
