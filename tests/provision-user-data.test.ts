import { randomBytes } from 'node:crypto';
import { type ComputeError, type Logger, manifest } from 'better-compute/core';
import {
  generateSigningKeyPair,
  lookupJoinToken,
  type Pki,
  pki,
  provisionedTargetResolver,
  workflowStepsLookup,
} from 'better-compute/pki';
import {
  BCD_PATHS,
  BCD_SYSTEMD_UNIT,
  cloudInitTemplate,
  defineStep,
  ignitionTemplate,
  provisionModule,
  type RenderedUserData,
  renderedUserData,
  renderTemplate,
  retryWorkflow,
  type Step,
  type UserDataOptions,
  type UserDataTemplate,
  type UserDataVariables,
} from 'better-compute/provision';
import { insertNode, isWorkerCrashed, settle } from 'better-compute/testkit';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ScratchDatabase, scratchPglite } from './support/databases';
import { createCrashingLab, createEngineLab, type EngineLab, json } from './support/engine-lab';
import { errorOf, rejectionOf } from './support/errors';

const SHA = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08';
const VARIABLES: UserDataVariables = {
  nodeId: 'node_01kabc',
  hostname: 'node-01kabc',
  joinToken: `tok_01kabcdefghjkmnpqrstvwxyz0.${'s'.repeat(43)}`,
  controlPlaneUrl: 'https://gw.eu-1.example.com',
  bcdUrl: 'https://downloads.example.com/bcd/0.2.0/bcd-linux-amd64',
  bcdSha256: SHA,
};
const OPTIONS: UserDataOptions = {
  controlPlaneUrl: VARIABLES.controlPlaneUrl,
  bcdUrl: VARIABLES.bcdUrl,
  bcdSha256: SHA.toUpperCase(),
  templates: {
    'acme-talos.yaml': 'machine:\n  token: {{joinToken}}\n  network:\n    hostname: {{hostname}}\n',
  },
};

interface WriteFile {
  path: string;
  permissions: string;
  content: string;
}
interface CloudConfig {
  hostname: string;
  preserve_hostname: boolean;
  write_files: WriteFile[];
  runcmd: string[][];
}
interface IgnitionFile {
  path: string;
  mode: number;
  contents: { source: string; verification?: { hash: string } };
}
interface IgnitionConfig {
  ignition: { version: string };
  storage: { files: IgnitionFile[] };
  systemd: { units: { name: string; enabled: boolean; contents: string }[] };
}

function parseCloudConfig(document: string): CloudConfig {
  const [header, ...body] = document.split('\n');
  expect(header).toBe('#cloud-config');
  return JSON.parse(body.join('\n')) as CloudConfig;
}

function writeFile(config: CloudConfig, path: string): WriteFile {
  const file = config.write_files.find((f) => f.path === path);
  if (!file) throw new Error(`no ${path} in the cloud-config`);
  return file;
}

function ignitionFile(config: IgnitionConfig, path: string): IgnitionFile {
  const file = config.storage.files.find((f) => f.path === path);
  if (!file) throw new Error(`no ${path} in the Ignition config`);
  return file;
}

function dataUrlText(source: string): string {
  expect(source.startsWith('data:;base64,')).toBe(true);
  return Buffer.from(source.slice('data:;base64,'.length), 'base64').toString('utf8');
}

describe('renderTemplate', () => {
  it('fills {{name}} placeholders in one pass and leaves other braces alone', () => {
    const template = 'hostname: {{hostname}}\ntoken: {{joinToken}}\njinja: {{ ds.meta_data.x }} {{ hostname }}\n';
    expect(renderTemplate(template, { hostname: 'node-1', joinToken: 'tok_a.b}}' })).toBe(
      'hostname: node-1\ntoken: tok_a.b}}\njinja: {{ ds.meta_data.x }} {{ hostname }}\n',
    );
  });

  it('renders the sample of the docs: a template with hostname and joinToken only', () => {
    const autoinstallTemplate = '#cloud-config\nautoinstall:\n  identity:\n    hostname: {{hostname}}\n';
    const token = VARIABLES.joinToken;
    const hostname = 'node_01kabc'.replace(/_/g, '-');
    expect(renderTemplate(autoinstallTemplate, { hostname, joinToken: token })).toContain('hostname: node-01kabc\n');
  });

  it.each([
    ['a line feed', 'node-1\nruncmd: [reboot]'],
    ['a carriage return', 'node-1\rx'],
    ['a line separator', 'node-1\u2028x'],
    ['a vertical tab', 'node-1\u000bx'],
    ['a NUL', 'node-1\u0000x'],
    ['{{', 'node-{{joinToken}}'],
  ])('refuses a value with %s with INVALID_INPUT naming the value', (_label, hostname) => {
    expect(errorOf(() => renderTemplate('hostname: {{hostname}}', { hostname }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['values', 'hostname'] },
    });
  });

  it('never repeats a refused value in the message', () => {
    const error = errorOf(() => renderTemplate('{{joinToken}}', { joinToken: 'secret-token\n' })) as ComputeError;
    expect(error.message).not.toContain('secret-token');
  });

  it('refuses a placeholder with no value with INVALID_CONFIG naming the placeholder', () => {
    expect(errorOf(() => renderTemplate('url: {{bcdUrl}}\nhost: {{hostname}}', { hostname: 'n' }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['template', 'bcdUrl'] },
    });
  });

  it('calls a function template with the variables, and refuses reading one with no value', () => {
    const template: UserDataTemplate = (v) => JSON.stringify({ host: v.hostname, token: v.joinToken });
    expect(JSON.parse(renderTemplate(template, VARIABLES))).toEqual({
      host: VARIABLES.hostname,
      token: VARIABLES.joinToken,
    });
    expect(errorOf(() => renderTemplate(template, { hostname: 'n' }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['template', 'joinToken'] },
    });
  });

  it('checks the values a function template gets too', () => {
    expect(errorOf(() => renderTemplate(() => 'x', { hostname: 'a\nb' }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['values', 'hostname'] },
    });
  });

  it('refuses a function that returns no string, and one that throws, without copying its message', () => {
    expect(errorOf(() => renderTemplate((() => 42) as never, VARIABLES))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['template'] },
    });
    const thrown = errorOf(() =>
      renderTemplate((v) => {
        throw new Error(`boom ${v.joinToken}`);
      }, VARIABLES),
    ) as ComputeError;
    expect(thrown).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['template'] } });
    expect(JSON.stringify({ message: thrown.message, details: thrown.details })).not.toContain(VARIABLES.joinToken);
  });
});

describe('the built-in templates', () => {
  it('cloud-init: #cloud-config with the hostname, the token in a 0600 file, bcd config and unit, and the checked install', () => {
    const config = parseCloudConfig(renderTemplate(cloudInitTemplate, VARIABLES));
    expect(Object.keys(config).sort()).toEqual(['hostname', 'preserve_hostname', 'runcmd', 'write_files']);
    expect(config.hostname).toBe(VARIABLES.hostname);
    expect(writeFile(config, BCD_PATHS.joinToken)).toMatchObject({ permissions: '0600', content: VARIABLES.joinToken });
    expect(JSON.parse(writeFile(config, BCD_PATHS.config).content)).toEqual({
      controlPlaneUrl: VARIABLES.controlPlaneUrl,
      nodeId: VARIABLES.nodeId,
      joinTokenFile: BCD_PATHS.joinToken,
    });
    expect(writeFile(config, BCD_PATHS.unit).content).toBe(BCD_SYSTEMD_UNIT);
    const installer = writeFile(config, BCD_PATHS.installer);
    expect(installer.permissions).toBe('0755');
    expect(installer.content).toContain('sha256sum');
    expect(installer.content).not.toContain(VARIABLES.bcdUrl);
    expect(config.runcmd).toEqual([['/bin/sh', BCD_PATHS.installer, VARIABLES.bcdUrl, SHA]]);
  });

  it('ignition: a v3 config that fetches bcd with its sha256, writes the token 0600 and enables the unit', () => {
    const config = JSON.parse(renderTemplate(ignitionTemplate, VARIABLES)) as IgnitionConfig;
    expect(config.ignition.version).toBe('3.3.0');
    expect(ignitionFile(config, BCD_PATHS.binary)).toMatchObject({
      mode: 0o755,
      contents: { source: VARIABLES.bcdUrl, verification: { hash: `sha256-${SHA}` } },
    });
    const token = ignitionFile(config, BCD_PATHS.joinToken);
    expect(token.mode).toBe(0o600);
    expect(dataUrlText(token.contents.source)).toBe(VARIABLES.joinToken);
    expect(dataUrlText(ignitionFile(config, '/etc/hostname').contents.source)).toBe(`${VARIABLES.hostname}\n`);
    expect(JSON.parse(dataUrlText(ignitionFile(config, BCD_PATHS.config).contents.source))).toMatchObject({
      controlPlaneUrl: VARIABLES.controlPlaneUrl,
    });
    expect(config.systemd.units).toEqual([{ name: 'bcd.service', enabled: true, contents: BCD_SYSTEMD_UNIT }]);
  });

  it('a hostile hostname cannot add keys or lines to either document', () => {
    const hostname = 'node-1", "runcmd": [["reboot"]], "x": "';
    const cloud = parseCloudConfig(renderTemplate(cloudInitTemplate, { ...VARIABLES, hostname }));
    expect(cloud.hostname).toBe(hostname);
    expect(cloud.runcmd).toHaveLength(1);
    const ignition = JSON.parse(renderTemplate(ignitionTemplate, { ...VARIABLES, hostname })) as IgnitionConfig;
    expect(Object.keys(ignition).sort()).toEqual(['ignition', 'storage', 'systemd']);
    expect(dataUrlText(ignitionFile(ignition, '/etc/hostname').contents.source)).toBe(`${hostname}\n`);
    expect(
      errorOf(() => renderTemplate(cloudInitTemplate, { ...VARIABLES, hostname: 'a\nruncmd: [reboot]' })),
    ).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['values', 'hostname'] } });
  });

  it('any value that passes keeps both documents to their fixed shape (property)', () => {
    const value = fc.string({ unit: 'grapheme', maxLength: 40 }).filter((s) => {
      try {
        renderTemplate('', { probe: s });
        return true;
      } catch {
        return false;
      }
    });
    fc.assert(
      fc.property(value, value, (hostname, joinToken) => {
        const variables = { ...VARIABLES, hostname, joinToken };
        const cloud = parseCloudConfig(renderTemplate(cloudInitTemplate, variables));
        expect(cloud.hostname).toBe(hostname);
        expect(writeFile(cloud, BCD_PATHS.joinToken).content).toBe(joinToken);
        expect(cloud.write_files.map((f) => f.path)).toHaveLength(4);
        const ignition = JSON.parse(renderTemplate(ignitionTemplate, variables)) as IgnitionConfig;
        expect(ignition.storage.files).toHaveLength(4);
        expect(dataUrlText(ignitionFile(ignition, BCD_PATHS.joinToken).contents.source)).toBe(joinToken);
      }),
      { numRuns: 200 },
    );
  });

  it('need the bcd values: a missing one is INVALID_CONFIG, a malformed digest or URL INVALID_INPUT', () => {
    const { bcdUrl: _omitted, ...withoutUrl } = VARIABLES;
    expect(errorOf(() => renderTemplate(cloudInitTemplate, withoutUrl))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['template', 'bcdUrl'] },
    });
    expect(errorOf(() => renderTemplate(ignitionTemplate, { ...VARIABLES, bcdSha256: 'abc' }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['values', 'bcdSha256'] },
    });
    expect(errorOf(() => renderTemplate(ignitionTemplate, { ...VARIABLES, bcdUrl: 'file:///bcd' }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['values', 'bcdUrl'] },
    });
  });
});

describe('provisionModule({ userData })', () => {
  it('registers userdata.render, wait.agentJoined and wait.observedGeneration as its own steps, first', () => {
    const extra = defineStep({
      id: 'acme.noop',
      runsOn: 'control-plane',
      timeout: '1m',
      retrySafe: true,
      input: manifest({}),
      run: async () => null,
    });
    expect(provisionModule({ steps: [extra] }).extensions?.map((e) => (e as { id: string }).id)).toEqual([
      'userdata.render',
      'wait.agentJoined',
      'wait.observedGeneration',
      'acme.noop',
    ]);
  });

  it('refuses bad options and a step reusing a built-in id with INVALID_CONFIG and the path', () => {
    expect(errorOf(() => provisionModule({ userData: { bcdSha256: 'nope' } }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['userData', 'bcdSha256'] },
    });
    expect(errorOf(() => provisionModule({ userData: { controlPlaneUrl: 'gw.example.com' } }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['userData', 'controlPlaneUrl'] },
    });
    expect(errorOf(() => provisionModule({ userData: { templates: { x: 42 as never } } }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['userData', 'templates', 'x'] },
    });
    const twin = defineStep({ ...provisionModule().engine.steps.get('wait.agentJoined')! } as never);
    expect(errorOf(() => provisionModule({ steps: [twin] }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['steps', 0] },
    });
  });
});

/** A logger that keeps every line, to check nothing secret reaches the logs. */
function captureLogger(lines: string[]): Logger {
  const keep = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push(JSON.stringify({ level, message, fields: fields ?? {} }));
  };
  return { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') };
}

async function countRows(lab: EngineLab, table: string): Promise<number> {
  const { rows } = await lab.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0]?.n ?? 0;
}

async function everythingStored(lab: EngineLab): Promise<string> {
  const { rows } = await lab.db.query<{ all: string | null }>(
    `SELECT coalesce((SELECT string_agg(s::text, ' ') FROM workflow_steps s), '') ||
            coalesce((SELECT string_agg(w::text, ' ') FROM workflows w), '') ||
            coalesce((SELECT string_agg(e::text, ' ') FROM events e), '') ||
            coalesce((SELECT string_agg(c::text, ' ') FROM commands c), '') AS all`,
  );
  return rows[0]?.all ?? '';
}

const renderProfile = { id: 'ud-cloud', userData: { kind: 'cloud-init' }, steps: [{ use: 'userdata.render' }] };

// A plugin's step that stages a `provisioned` token without naming a node, written with its result.
const stageTokenStep = defineStep({
  id: 'probe.stageToken',
  runsOn: 'control-plane',
  timeout: '1m',
  retrySafe: true,
  input: manifest({}),
  run: async (_input, ctx) => {
    const staged = ctx.pki?.stageJoinToken?.({
      tenantId: ctx.tenantId,
      role: 'provisioned',
      ttlSeconds: 600,
      maxUses: 1,
    });
    if (!staged) throw new Error('no stageJoinToken on ctx.pki');
    ctx.writeWithResult?.(staged.write);
    return { joinTokenId: staged.id };
  },
});

describe('userdata.render in a workflow, with the pki wired', () => {
  let scratch: ScratchDatabase;
  let lab: EngineLab;
  let security: Pki;
  const logs: string[] = [];
  const labOptions = () => ({
    modules: [security.module],
    steps: [stageTokenStep as Step],
    userData: OPTIONS,
    kernel: { pki: security.port(), secrets: security.secrets(scratch.db), logger: captureLogger(logs) },
  });

  beforeAll(async () => {
    scratch = await scratchPglite();
    security = pki({ key: randomBytes(32).toString('hex') });
    lab = await createEngineLab(scratch.db, labOptions());
  });
  afterAll(async () => {
    await lab?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await lab.reset();
    logs.length = 0;
  });

  async function renderedDocument(workflowId: string): Promise<{ result: RenderedUserData; document: string }> {
    const wf = await lab.workflow(workflowId);
    expect(wf.state).toBe('succeeded');
    const result = wf.steps[0]?.result as RenderedUserData;
    const document = await lab.compute.context.secrets!.resolve(result.userDataRef);
    return { result, document };
  }

  it('returns only the reference; the secret resolves to the cloud-init document with a fresh single-use token', async () => {
    const id = await lab.start({ ...renderProfile, tokenTtlSeconds: 3600 });
    await lab.settle();
    const { result, document } = await renderedDocument(id);
    expect(Object.keys(result).sort()).toEqual(['joinTokenId', 'kind', 'userDataRef']);
    expect(result).toMatchObject({ kind: 'cloud-init', userDataRef: expect.stringMatching(/^sec_/) });
    const config = parseCloudConfig(document);
    expect(config.hostname).toBe(lab.nodeId.replace(/_/g, '-'));
    const token = writeFile(config, BCD_PATHS.joinToken).content;
    expect(token.startsWith(`${result.joinTokenId}.`)).toBe(true);
    expect(config.runcmd).toEqual([['/bin/sh', BCD_PATHS.installer, VARIABLES.bcdUrl, SHA]]);
    expect(JSON.parse(writeFile(config, BCD_PATHS.config).content)).toMatchObject({
      controlPlaneUrl: VARIABLES.controlPlaneUrl,
      nodeId: lab.nodeId,
    });
    const { rows } = await lab.db.query<Record<string, unknown>>(
      `SELECT role, node_id, site_id, max_uses, uses, extract(epoch FROM expires_at - created_at)::int AS ttl
       FROM pki_join_tokens WHERE id = $1`,
      [result.joinTokenId],
    );
    expect(rows).toEqual([
      { role: 'provisioned', node_id: lab.nodeId, site_id: lab.siteId, max_uses: 1, uses: 0, ttl: 3600 },
    ]);
  });

  it('mints the token for 7200 seconds when the profile sets no tokenTtlSeconds', async () => {
    const id = await lab.start(renderProfile);
    await lab.settle();
    const { result } = await renderedDocument(id);
    const { rows } = await lab.db.query<{ ttl: number }>(
      'SELECT extract(epoch FROM expires_at - created_at)::int AS ttl FROM pki_join_tokens WHERE id = $1',
      [result.joinTokenId],
    );
    expect(rows[0]?.ttl).toBe(7200);
  });

  it('keeps the document and the token out of workflow_steps, workflows, events, commands and the logs', async () => {
    const id = await lab.start(renderProfile);
    await lab.settle();
    const { result, document } = await renderedDocument(id);
    const token = writeFile(parseCloudConfig(document), BCD_PATHS.joinToken).content;
    const secretPart = token.split('.')[1] as string;
    const stored = await everythingStored(lab);
    expect(stored).toContain(result.userDataRef);
    for (const haystack of [stored, logs.join('\n')]) {
      expect(haystack).not.toContain(secretPart);
      expect(haystack).not.toContain('#cloud-config');
      expect(haystack).not.toContain('sha256sum');
    }
    expect(logs.some((line) => line.includes('user data rendered') && line.includes(result.joinTokenId))).toBe(true);
  });

  it('renders Ignition for an ignition profile', async () => {
    const id = await lab.start({ ...renderProfile, id: 'ud-ignition', userData: { kind: 'ignition' } });
    await lab.settle();
    const { result, document } = await renderedDocument(id);
    expect(result.kind).toBe('ignition');
    const config = JSON.parse(document) as IgnitionConfig;
    expect(dataUrlText(ignitionFile(config, BCD_PATHS.joinToken).contents.source).startsWith(result.joinTokenId)).toBe(
      true,
    );
    expect(ignitionFile(config, BCD_PATHS.binary).contents.verification).toEqual({ hash: `sha256-${SHA}` });
  });

  it('renders a talos profile with the registered template it names', async () => {
    const id = await lab.start({
      ...renderProfile,
      id: 'ud-talos',
      userData: { kind: 'talos', template: 'acme-talos.yaml' },
    });
    await lab.settle();
    const { result, document } = await renderedDocument(id);
    expect(result.kind).toBe('talos');
    expect(document).toMatch(
      new RegExp(`^machine:\\n  token: ${result.joinTokenId}\\.[A-Za-z0-9_-]{43}\\n  network:\\n    hostname: `),
    );
  });

  it.each([
    ['a talos profile without a template', { kind: 'talos' }],
    ['a template nobody registered', { kind: 'cloud-init', template: 'acme-missing' }],
    ['a profile without userData', undefined],
  ])('fails INVALID_CONFIG for %s, minting nothing', async (_label, userData) => {
    const tokensBefore = await countRows(lab, 'pki_join_tokens');
    const id = await lab.start({
      id: 'ud-bad',
      steps: [{ use: 'userdata.render' }],
      ...(userData ? { userData } : {}),
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]).toMatchObject({ state: 'failed', error: { code: 'INVALID_CONFIG' } });
    expect(await countRows(lab, 'pki_join_tokens')).toBe(tokensBefore);
  });

  it('fails a node id with a line break INVALID_INPUT before minting, and keeps a quote inside the hostname', async () => {
    const tokensBefore = await countRows(lab, 'pki_join_tokens');
    const hostile = await insertNode(lab.db, { id: 'node_evil\nruncmd', siteId: lab.siteId }, lab.clock);
    const refused = await lab.start(renderProfile, { nodeId: hostile });
    await lab.settle();
    expect((await lab.workflow(refused)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'INVALID_INPUT' } });
    expect(await countRows(lab, 'pki_join_tokens')).toBe(tokensBefore);

    const quoted = await insertNode(lab.db, { id: 'node_a"b: c', siteId: lab.siteId }, lab.clock);
    const id = await lab.start({ ...renderProfile, id: 'ud-quoted' }, { nodeId: quoted });
    await lab.settle();
    const config = parseCloudConfig((await renderedDocument(id)).document);
    expect(config.hostname).toBe('node-a"b: c');
    expect(Object.keys(config).sort()).toEqual(['hostname', 'preserve_hostname', 'runcmd', 'write_files']);
  });

  it('renderedUserData finds the latest succeeded render of the workflow, and undefined elsewhere', async () => {
    const id = await lab.start({ ...renderProfile, steps: [{ use: 'lab.noop' }, { use: 'userdata.render' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(await renderedUserData(lab.db, id)).toEqual(json(wf.steps[1]?.result));
    expect(await renderedUserData(lab.db, 'wf_none')).toBeUndefined();
  });

  it('maps the token back to the node: a join with it becomes the node, once; the step result finds it too', async () => {
    const id = await lab.start(renderProfile);
    await lab.settle();
    const { result, document } = await renderedDocument(id);
    const token = writeFile(parseCloudConfig(document), BCD_PATHS.joinToken).content;
    const agentKey = generateSigningKeyPair('ed25519');
    const joined = await lab.db.transaction((tx) =>
      security.joinAgent(tx, { token, publicKey: agentKey.publicKeyPem }),
    );
    expect(joined).toMatchObject({ nodeId: lab.nodeId, role: 'provisioned', joinTokenId: result.joinTokenId });
    // Once: the same agent asking again gets the same certificate; another key is refused.
    const repeated = await lab.db.transaction((tx) =>
      security.joinAgent(tx, { token, publicKey: agentKey.publicKeyPem }),
    );
    expect(repeated.serial).toBe(joined.serial);
    const otherKey = generateSigningKeyPair('ed25519');
    const again = await rejectionOf(() =>
      lab.db.transaction((tx) => security.joinAgent(tx, { token, publicKey: otherKey.publicKeyPem })),
    );
    expect(again).toMatchObject({ code: 'UNAUTHENTICATED', details: { reason: 'token-exhausted' } });

    // Without the node recorded on the token, the provisioned attestor finds it through the step result.
    expect(await workflowStepsLookup(lab.db, result.joinTokenId)).toBe(lab.nodeId);
    const row = await lookupJoinToken(lab.db, token);
    const attested = await lab.db.transaction((tx) =>
      provisionedTargetResolver()(tx, { token: { ...row, node_id: null }, claims: {}, clock: lab.clock }),
    );
    expect(attested.nodeId).toBe(lab.nodeId);
  });

  it('mints a fresh token when the workflow is retried from the render (a new attempt)', async () => {
    const id = await lab.start({
      ...renderProfile,
      id: 'ud-retry',
      steps: [{ use: 'userdata.render' }, { use: 'lab.throw' }],
    });
    await lab.settle();
    const first = (await lab.workflow(id)).steps[0]?.result as RenderedUserData;
    expect((await lab.workflow(id)).state).toBe('failed');
    await retryWorkflow(lab.compute.context, { workflowId: id, fromStep: 'main.1' });
    await lab.settle();
    const second = (await lab.workflow(id)).steps[0]?.result as RenderedUserData;
    expect(second.joinTokenId).not.toBe(first.joinTokenId);
    expect(second.userDataRef).not.toBe(first.userDataRef);
    const { rows } = await lab.db.query<{ step_key: string }>(
      'SELECT step_key FROM userdata_renders ORDER BY created_at, step_key',
    );
    expect(rows.map((r) => r.step_key).sort()).toEqual([`wf:${id}:main.1`, `wf:${id}:main.1#1`]);
    expect(await renderedUserData(lab.db, id)).toEqual(second);
  });

  it("remembers the workflow's node on a provisioned token a step stages without naming one", async () => {
    const id = await lab.start({ id: 'stage-token', steps: [{ use: 'probe.stageToken' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    const { joinTokenId } = (wf.steps[0]?.result ?? {}) as { joinTokenId?: string };
    const { rows } = await lab.db.query<{ node_id: string }>('SELECT node_id FROM pki_join_tokens WHERE id = $1', [
      joinTokenId,
    ]);
    expect(rows).toEqual([{ node_id: lab.nodeId }]);
  });

  it('writes the token, the document and its record with the result: a run cut short leaves none, its re-run renders once', async () => {
    const id = await lab.start(renderProfile);
    const tables = ['pki_join_tokens', 'pki_secrets', 'userdata_renders'];
    const counts = async () => Promise.all(tables.map((table) => countRows(lab, table)));
    const before = await counts();
    // Boundaries of the dying worker: 1 claims the due items, 2 the expiry sweep, 3 requeues it, 4 starts the workflow
    // and marks main.1 running; the run writes nothing of its own; 5 records it succeeded with what it rendered, and
    // the worker dies before that commits.
    const dying = await createCrashingLab(lab.db, lab.clock, 5, 'before-commit', labOptions());
    expect(isWorkerCrashed(await rejectionOf(() => dying.compute.runDueWork()))).toBe(true);
    expect((await lab.workflow(id)).steps[0]?.state).toBe('running');
    expect(await counts()).toEqual(before);

    await lab.settle();
    const { result, document } = await renderedDocument(id);
    expect(await counts()).toEqual(before.map((n) => n + 1));
    expect(document).toContain(result.joinTokenId);
    // One statement wrote the three, the one that recorded the step succeeded.
    const { rows } = await lab.db.query<{ writers: string[] }>(
      `SELECT ARRAY[(SELECT xmin::text FROM pki_join_tokens WHERE id = $1), (SELECT xmin::text FROM pki_secrets WHERE id = $2),
         (SELECT xmin::text FROM userdata_renders WHERE user_data_ref = $2),
         (SELECT xmin::text FROM events WHERE subject = $3 AND type = 'workflow.step.succeeded')] AS writers`,
      [result.joinTokenId, result.userDataRef, `workflow/${id}`],
    );
    expect(new Set(rows[0]?.writers).size).toBe(1);
  });

  it('without ports that stage, returns the first run result when the worker died after recording it, minting nothing more', async () => {
    // pki's port without its staging: the token and the document are written before the result, found by a re-run.
    const unstaged = () => {
      const options = labOptions();
      const { stageJoinToken: _left, ...port } = security.port();
      return { ...options, kernel: { ...options.kernel, pki: port } };
    };
    const id = await lab.start(renderProfile);
    const [tokens, secrets] = [await countRows(lab, 'pki_join_tokens'), await countRows(lab, 'pki_secrets')];
    // Boundaries of the dying worker: 1 claims the due items, 2 the expiry sweep, 3 requeues it, 4 starts the workflow
    // and marks main.1 running, then the step mints its token (5) and records its render (6); the worker dies after
    // that commit, before settling.
    const dying = await createCrashingLab(lab.db, lab.clock, 6, 'after-commit', unstaged());
    expect(isWorkerCrashed(await rejectionOf(() => dying.compute.runDueWork()))).toBe(true);
    const { rows: recorded } = await lab.db.query<Record<string, string>>(
      'SELECT step_key, user_data_ref, join_token_id, kind FROM userdata_renders',
    );
    expect(recorded).toEqual([
      {
        step_key: `wf:${id}:main.1`,
        user_data_ref: expect.any(String),
        join_token_id: expect.any(String),
        kind: 'cloud-init',
      },
    ]);
    expect((await lab.workflow(id)).steps[0]?.state).toBe('running');

    const survivor = await createEngineLab(scratch.db, { ...unstaged(), clock: lab.clock });
    try {
      await settle(survivor.compute, { clock: lab.clock });
    } finally {
      await survivor.close();
    }
    const { result } = await renderedDocument(id);
    expect(result).toEqual({
      userDataRef: recorded[0]?.user_data_ref,
      kind: 'cloud-init',
      joinTokenId: recorded[0]?.join_token_id,
    });
    expect(await countRows(lab, 'pki_join_tokens')).toBe(tokens + 1);
    expect(await countRows(lab, 'pki_secrets')).toBe(secrets + 1);
  });
});

describe('userdata.render without the ports', () => {
  let scratch: ScratchDatabase;
  afterAll(async () => {
    await scratch?.drop();
  });

  it('fails INVALID_CONFIG when ctx.pki is missing, and when ctx.secrets is missing', async () => {
    scratch = await scratchPglite();
    const security = pki({ key: randomBytes(32).toString('hex') });
    const cases = [
      { kernel: {}, missing: 'pki' },
      { kernel: { pki: security.port() }, missing: 'secrets' },
    ];
    for (const { kernel, missing } of cases) {
      const lab = await createEngineLab(scratch.db, { modules: [security.module], userData: OPTIONS, kernel });
      try {
        await lab.reset();
        const id = await lab.start(renderProfile);
        await lab.settle();
        const step = (await lab.workflow(id)).steps[0];
        expect(step).toMatchObject({ state: 'failed', error: { code: 'INVALID_CONFIG' } });
        expect(step?.error?.message).toContain(`ctx.${missing}`);
      } finally {
        await lab.close();
      }
    }
    const { rows } = await scratch.db.query<{ n: number }>('SELECT count(*)::int AS n FROM pki_join_tokens');
    expect(rows[0]?.n).toBe(0);
  });
});
