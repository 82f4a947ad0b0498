import { CliError, usage } from '../errors';
import { cell, colorState, formatLabels, keyValues, type Output, table } from '../output';
import type { Handler, Runtime } from '../runtime';
import { type Page, parsePairs, printPage, readDocument, readPages, readText } from './shared';

/** `metal.get`'s answer (the fields the CLI prints). */
interface Machine {
  nodeId: string;
  tenantId: string;
  siteId: string;
  name: string | null;
  pool: string | null;
  state: string;
  held: boolean;
  labels: Record<string, string>;
  lastError: { code?: string; message?: string } | null;
  awaiting: unknown;
  createdAt: string;
  updatedAt: string;
  macs?: string[];
  bmc?: { address: string; driver: string; hasCredential: boolean };
  workflow: {
    id: string;
    profileId: string;
    profileVersion: number;
    state: string;
    step: { stepId: string; action: string; state: string; attempt: number } | null;
  } | null;
  deploy?: { profileId?: string; image?: string | null } | null;
}

function workflowCell(machine: Machine): string {
  const w = machine.workflow;
  if (!w) return '-';
  return `${w.profileId} ${w.state}${w.step ? ` ${w.step.stepId}` : ''}`;
}

export const list: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const page = await readPages<Machine>(
    client,
    'metal.list',
    { state: opts.state, siteId: opts.site, pool: opts.pool, selector: opts.selector },
    opts,
  );
  const { c } = rt.out;
  printPage(
    rt.out,
    page,
    (m) => m.nodeId,
    () =>
      table(
        ['node', 'name', 'state', 'site', 'pool', 'workflow', 'labels'],
        page.items.map((m) => [
          m.nodeId,
          cell(m.name),
          colorState(m.held ? `${m.state} (held)` : m.state, c),
          m.siteId,
          cell(m.pool),
          workflowCell(m),
          formatLabels(m.labels),
        ]),
        c,
      ),
    'no machines',
  );
  return 0;
};

function printMachine(out: Output, machine: Machine): void {
  const { c } = out;
  const w = machine.workflow;
  const pairs: [string, string][] = [
    ['node', machine.nodeId],
    ['name', cell(machine.name)],
    ['tenant', machine.tenantId],
    ['site', machine.siteId],
    ['pool', cell(machine.pool)],
    ['state', colorState(machine.state, c) + (machine.held ? c.yellow(' (held)') : '')],
    ['labels', formatLabels(machine.labels)],
  ];
  if (machine.macs) pairs.push(['macs', machine.macs.join(', ') || '-']);
  if (machine.bmc) {
    pairs.push([
      'bmc',
      `${machine.bmc.address} (${machine.bmc.driver}${machine.bmc.hasCredential ? ', credential stored' : ''})`,
    ]);
  }
  pairs.push([
    'workflow',
    w
      ? `${w.id} ${w.profileId} v${w.profileVersion} ${colorState(w.state, c)}${
          w.step ? `, step ${w.step.stepId} ${w.step.action} ${w.step.state} (attempt ${w.step.attempt + 1})` : ''
        }`
      : '-',
  ]);
  if (machine.lastError) {
    pairs.push(['last error', c.red(`${machine.lastError.code ?? ''} ${machine.lastError.message ?? ''}`.trim())]);
  }
  pairs.push(['created', machine.createdAt], ['updated', machine.updatedAt]);
  out.out(keyValues(pairs, c));
}

export const get: Handler = async (rt, args) => {
  const client = await rt.client();
  const machine = await client.call<Machine>('metal.get', { nodeId: args[0] });
  if (rt.out.json) rt.out.printJson(machine);
  else if (rt.out.quiet) rt.out.out(machine.nodeId);
  else printMachine(rt.out, machine);
  return 0;
};

/** Prints what a lifecycle method answered, then with `--wait` follows its workflow. */
async function started(rt: Runtime, machine: Machine, opts: Record<string, unknown>): Promise<number> {
  const { out } = rt;
  const wait = opts.wait === true && machine.workflow !== null;
  if (out.json && !wait) out.printJson(machine);
  else if (out.json) process.stdout.write(`${JSON.stringify(machine)}\n`);
  else if (out.quiet) out.out(machine.nodeId);
  else if (!out.json) {
    const w = machine.workflow;
    out.out(
      `${machine.nodeId} ${colorState(machine.state, out.c)}${
        w ? `: workflow ${w.id} (${w.profileId} v${w.profileVersion}) ${w.state}` : ''
      }`,
    );
  }
  if (!wait || !machine.workflow) return 0;
  const { watchWorkflow } = await import('./watch');
  return watchWorkflow(await rt.client(), out, { workflowId: machine.workflow.id, nodeId: machine.nodeId });
}

function machineInput(verb: 'enroll' | 'adopt') {
  return async (opts: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const base = opts.file ? await readDocument(opts.file as string, '--file') : {};
    if (typeof base !== 'object' || base === null || Array.isArray(base)) {
      throw usage(`${opts.file} must hold an object (the ${verb} input)`, ['--file']);
    }
    const input = { ...(base as Record<string, unknown>) };
    const bmc = { ...((input.bmc as Record<string, unknown> | undefined) ?? {}) };
    if (opts.bmc) bmc.address = opts.bmc;
    if (opts.driver) bmc.driver = opts.driver;
    if (opts.bmcUsername) bmc.username = opts.bmcUsername;
    if (opts.bmcPasswordEnv) {
      const value = process.env[opts.bmcPasswordEnv as string];
      if (!value) throw usage(`the environment variable ${opts.bmcPasswordEnv} is not set`, ['--bmc-password-env']);
      bmc.password = value;
    }
    if (Object.keys(bmc).length > 0) input.bmc = bmc;
    if (opts.site) input.siteId = opts.site;
    if (opts.name) input.name = opts.name;
    if (opts.mac) input.macs = opts.mac;
    const labels = parsePairs(opts.label as string[] | undefined, '--label');
    if (labels) input.labels = { ...((input.labels as Record<string, string> | undefined) ?? {}), ...labels };
    if (opts.pool) input.pool = opts.pool;
    if (opts.holdAfter) input.holdAfter = opts.holdAfter;
    if (!input.siteId) throw usage(`metal ${verb} needs --site (or siteId in --file)`, ['--site']);
    if (!bmc.address || !bmc.driver)
      throw usage(`metal ${verb} needs --bmc and --driver (or bmc in --file)`, ['--bmc']);
    if (!Array.isArray(input.macs) || input.macs.length === 0) {
      throw usage(`metal ${verb} needs at least one --mac (or macs in --file)`, ['--mac']);
    }
    return input;
  };
}

export const enroll: Handler = async (rt, _args, opts) => {
  const input = await machineInput('enroll')(opts);
  const client = await rt.client();
  return started(rt, await client.call<Machine>('metal.enroll', input), opts);
};

export const adopt: Handler = async (rt, _args, opts) => {
  const input = await machineInput('adopt')(opts);
  const client = await rt.client();
  return started(rt, await client.call<Machine>('metal.adopt', input), opts);
};

function lifecycle(method: string): Handler {
  return async (rt, args, opts) => {
    const client = await rt.client();
    return started(rt, await client.call<Machine>(method, { nodeId: args[0] }), opts);
  };
}

export const inspect = lifecycle('metal.inspect');
export const commission = lifecycle('metal.commission');
export const release = lifecycle('metal.release');
export const retire = lifecycle('metal.retire');
export const recover = lifecycle('metal.recover');

export const deploy: Handler = async (rt, args, opts) => {
  const userData = opts.userData ? await readText(opts.userData as string, '--user-data') : undefined;
  const client = await rt.client();
  const machine = await client.call<Machine>('metal.deploy', {
    nodeId: args[0],
    profileId: opts.profile,
    profileVersion: opts.profileVersion,
    image: opts.image,
    userData,
  });
  return started(rt, machine, opts);
};

export const abort: Handler = async (rt, args, opts) => {
  const client = await rt.client();
  const answer = await client.call<Machine>('metal.abort', { nodeId: args[0], reason: opts.reason });
  return started(rt, answer, {});
};

export const labels: Handler = async (rt, args, opts) => {
  const nodeId = args[0] as string;
  const changes = (args[1] as string[] | undefined) ?? [];
  const client = await rt.client();
  let machine: Machine;
  if (changes.length === 0 && !opts.replace) {
    machine = await client.call<Machine>('metal.get', { nodeId });
  } else {
    const set: Record<string, string> = {};
    const remove: string[] = [];
    for (const change of changes) {
      if (/^[^=]+-$/.test(change)) remove.push(change.slice(0, -1));
      else if (change.indexOf('=') > 0) Object.assign(set, parsePairs([change], 'changes'));
      else throw usage(`${change} is neither key=value nor key-`, ['changes']);
    }
    if (opts.replace && remove.length > 0) throw usage('--replace takes key=value only', ['changes']);
    const current = opts.replace ? {} : (await client.call<Machine>('metal.get', { nodeId })).labels;
    const next = { ...current, ...set };
    for (const key of remove) {
      if (!(key in next)) throw new CliError('NOT_FOUND', `the machine has no label ${key}`, { path: ['changes'] });
      delete next[key];
    }
    machine = await client.call<Machine>('metal.setLabels', { nodeId, labels: next });
  }
  if (rt.out.json) rt.out.printJson(machine);
  else if (rt.out.quiet) {
    for (const key of Object.keys(machine.labels)) rt.out.out(key);
  } else {
    const entries = Object.entries(machine.labels).sort(([a], [b]) => a.localeCompare(b));
    rt.out.out(entries.length === 0 ? 'no labels' : table(['key', 'value'], entries, rt.out.c));
  }
  return 0;
};

export type { Page };
