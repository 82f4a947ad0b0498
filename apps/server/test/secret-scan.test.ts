import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigningKeyPair } from '@better-compute/pki';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, api, call, type ServerProcess, startServer, tempDir } from './support/server-process';
import { openEvents } from './support/sse';

// Issue 18, the secret scan: a sequence that handles every kind of secret (BMC credentials at enroll, a site join
// token and an agent joining with it, a minted credential used for a call, user data at deploy, secrets sent where
// they do not belong in malformed or refused requests), then the server's whole stdout and stderr, /metrics, every
// event from the start (events.list and the SSE stream) and the API's own answers about those objects are scanned
// for each secret value, and for the admin token, the at-rest key and the TLS private key. None may appear (the admin
// token once, in the start banner, by design).

let server: ServerProcess;
let dir: Awaited<ReturnType<typeof tempDir>>;
const unique = () => randomBytes(18).toString('base64url');
const bmcPassword = `bmc-pw-${unique()}`;
const bmcUsername = 'admin';
const userData = `#cloud-config\n# user-data-secret-${unique()}\n`;
const userDataMarker = userData.split('user-data-secret-')[1]?.trim() as string;
/** name → value: every secret the file saw. */
const secrets = new Map<string, string>();
/** Every answer the API gave along the way (error messages must not carry a secret either). */
const answers: { what: string; answer: Answer }[] = [];

beforeAll(async () => {
  dir = await tempDir('bc-secrets-');
  server = await startServer({ dataDir: dir.path });
  secrets.set('admin token', server.adminToken as string);
  const atRest = readFileSync(join(dir.path, 'secret.key'), 'utf8').trim();
  secrets.set('at-rest key', atRest);
  const raw = Buffer.from(atRest, /^[0-9a-f]{64}$/i.test(atRest) ? 'hex' : 'base64');
  secrets.set('at-rest key (hex)', raw.toString('hex'));
  secrets.set('at-rest key (base64)', raw.toString('base64'));
  const tlsKey = readFileSync(join(dir.path, 'tls/server.key'), 'utf8');
  for (const [i, line] of tlsKey.split('\n').entries()) {
    if (line.length >= 40 && !line.startsWith('-----')) secrets.set(`TLS key line ${i}`, line);
  }
  secrets.set('BMC password', bmcPassword);
  secrets.set('user data', userDataMarker);
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await dir?.remove();
});

async function record(what: string, answer: Promise<Answer>): Promise<Answer> {
  const got = await answer;
  answers.push({ what, answer: got });
  return got;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function leaks(text: string): string[] {
  return [...secrets].filter(([, value]) => text.includes(value)).map(([name]) => name);
}

// The scan reads what the steps before it made the server answer and log: the tests run in file order even when
// vitest shuffles.
describe('a sequence that handles secrets', { shuffle: false }, () => {
  let siteId: string;
  let nodeId: string;

  it('enrolls a machine with BMC credentials, mints a join token, joins an agent, creates and uses a credential', async () => {
    siteId = (await record('sites.create', api(server, 'sites.create', { tenantId: 'root', name: 'dc-secret' }))).json()
      .id as string;
    const minted = await record('sites.joinToken', api(server, 'sites.joinToken', { tenantId: 'root', siteId }));
    expect(minted.status).toBe(200);
    const joinToken = minted.json().token as string;
    secrets.set('join token', joinToken);

    const enrolled = await record(
      'metal.enroll',
      api(server, 'metal.enroll', {
        tenantId: 'root',
        siteId,
        name: 'gpu-secret',
        bmc: { address: '10.0.0.7', driver: 'redfish', username: bmcUsername, password: bmcPassword },
        macs: ['0c:42:a1:00:00:09'],
      }),
    );
    expect(enrolled.status, enrolled.text).toBe(200);
    nodeId = enrolled.json().nodeId as string;

    const key = generateSigningKeyPair('es256');
    for (const [i, line] of key.privateKeyPem.split('\n').entries()) {
      if (line.length >= 40 && !line.startsWith('-----')) secrets.set(`agent key line ${i}`, line);
    }
    const joined = await record(
      'agent join',
      call(`${server.agentUrl}/agent/v1/join`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: joinToken, publicKey: key.publicJwk }),
        ca: server.ca,
      }),
    );
    expect(joined.status, joined.text).toBe(200);
    const cert = joined.json().certificatePem as string;
    const agentCall = (method: string, body: unknown) =>
      record(
        `agent ${method}`,
        call(`${server.agentUrl}/agent/v1/${method}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
          ca: server.ca,
          cert,
          key: key.privateKeyPem,
        }),
      );
    expect((await agentCall('sessions.open', { role: 'site', bootId: 'boot-secret' })).status).toBe(200);
    // The site agent picks up what the enroll asked of it (the BMC credentials travel by reference, if at all).
    await agentCall('commands.poll', { waitMs: 3_000 });

    const credential = await record(
      'credentials.create',
      api(server, 'credentials.create', { tenantId: 'root', name: 'ci', permissions: ['compute:metal:read'] }),
    );
    expect(credential.status, credential.text).toBe(200);
    const credentialToken = credential.json().token as string;
    secrets.set('credential token', credentialToken);
    expect(
      (await record('metal.list as ci', api(server, 'metal.list', { tenantId: 'root' }, credentialToken))).status,
    ).toBe(200);
    // Denied with that credential: the refusal names the permission, not the token.
    const denied = await record(
      'sites.create as ci',
      api(server, 'sites.create', { tenantId: 'root', name: 'nope' }, credentialToken),
    );
    expect(denied.status).toBe(403);
  });

  it('sends user data at deploy, and secrets where they do not belong', async () => {
    // Not deployable yet (still enrolling): refused, and the user data stored for it is dropped again.
    const deploy = await record(
      'metal.deploy',
      api(server, 'metal.deploy', { tenantId: 'root', nodeId, profileId: 'metal.deploy', userData }),
    );
    expect(deploy.status, deploy.text).toBeGreaterThanOrEqual(400);
    expect(deploy.status).toBeLessThan(500);

    const post = (url: string, body: string, headers: Record<string, string> = {}) =>
      record(`hostile ${url}`, call(url, { method: 'POST', headers, body, ca: server.ca }));
    const auth = { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' };
    // Malformed JSON quoting a password and a token: the parser's message (which quotes the body) is not passed on.
    await post(`${server.apiUrl}/v1/metal.enroll`, `{"bmc":{"password":"${bmcPassword}"`, auth);
    await post(`${server.agentUrl}/agent/v1/join`, `{"token":"${secrets.get('join token')}",`);
    // Well-formed but invalid: a secret in a mistyped or unknown field, or as a bearer token.
    await post(
      `${server.apiUrl}/v1/metal.enroll`,
      JSON.stringify({ tenantId: 'root', siteId, bmc: { password: bmcPassword, extra: bmcPassword }, macs: 'x' }),
      auth,
    );
    await post(`${server.apiUrl}/v1/sites.list`, '{"tenantId":"root"}', {
      authorization: `Bearer ${secrets.get('join token')}`,
    });
    await post(`${server.apiUrl}/v1/sites.list?token=${bmcPassword}`, '{"tenantId":"root"}', {
      authorization: `Bearer ${bmcPassword}`,
    });
    await post(`${server.agentUrl}/agent/v1/join`, JSON.stringify({ token: bmcPassword, publicKey: bmcPassword }));
    await post(`${server.agentUrl}/agent/v1/commands.poll`, JSON.stringify({ waitMs: bmcPassword }));
    // A used join token again, and with an unknown field holding the user data.
    await post(
      `${server.agentUrl}/agent/v1/join`,
      JSON.stringify({ token: secrets.get('join token'), publicKey: {}, userData }),
    );
    for (const { what, answer } of answers) expect(answer.status, what).toBeLessThan(500);
    // Let the workers act on the enrolled machine (its workflow's first steps write events and step results).
    await sleep(1_500);
  });

  it('no answer, log line, metric or event carries a secret', async () => {
    expect(secrets.size).toBeGreaterThanOrEqual(10);
    for (const { what, answer } of answers) {
      const allowed =
        what === 'sites.joinToken' ? ['join token'] : what === 'credentials.create' ? ['credential token'] : [];
      expect(
        leaks(answer.text).filter((name) => !allowed.includes(name)),
        what,
      ).toEqual([]);
    }

    // The objects' own views: the machine, its workflows with their steps and results, the credentials, the sites.
    const views: Answer[] = [
      await api(server, 'metal.get', { tenantId: 'root', nodeId }),
      await api(server, 'metal.list', { tenantId: 'root' }),
      await api(server, 'credentials.list', { tenantId: 'root' }),
      await api(server, 'sites.list', { tenantId: 'root' }),
    ];
    const workflows = await api(server, 'workflows.list', { tenantId: 'root', nodeId });
    views.push(workflows);
    for (const workflow of (workflows.json().items as { id: string }[]) ?? []) {
      views.push(await api(server, 'workflows.get', { tenantId: 'root', nodeId, workflowId: workflow.id }));
    }
    expect(views.length).toBeGreaterThan(5);
    for (const view of views) {
      expect(view.status, view.text).toBe(200);
      expect(leaks(view.text), view.text.slice(0, 200)).toEqual([]);
    }

    // Every event from the start, pulled page by page.
    const events: unknown[] = [];
    let after: string | undefined;
    for (let page = 0; page < 100; page += 1) {
      const listed = await api(server, 'events.list', {
        tenantId: 'root',
        allTenants: true,
        limit: 100,
        ...(after ? { after } : {}),
      });
      expect(listed.status, listed.text).toBe(200);
      const body = listed.json() as { events: unknown[]; cursor: string };
      events.push(...body.events);
      if (body.events.length === 0 || body.cursor === after) break;
      after = body.cursor;
    }
    expect(events.length).toBeGreaterThan(3);
    expect(leaks(JSON.stringify(events))).toEqual([]);
    // The same from the event stream.
    const stream = await openEvents(`${server.apiUrl}/v1/events?from=start&allTenants=true`, {
      ca: server.ca,
      headers: { authorization: `Bearer ${server.adminToken}` },
    });
    const streamed = await stream.waitForEvents(events.length);
    stream.close();
    expect(leaks(JSON.stringify(streamed))).toEqual([]);

    const metrics = await call(`${server.apiUrl}/metrics`, { ca: server.ca });
    expect(metrics.status).toBe(200);
    expect(leaks(metrics.text)).toEqual([]);

    // stdout: the banner, which shows the admin token once by design, and nothing else.
    const stdout = server.stdout();
    expect(stdout.split(server.adminToken as string)).toHaveLength(2);
    expect(leaks(stdout.replace(server.adminToken as string, ''))).toEqual([]);
    const stderr = server.stderr();
    expect(stderr.split('\n').length).toBeGreaterThan(20);
    const leakedLines = stderr.split('\n').filter((line) => leaks(line).length > 0);
    expect(leakedLines).toEqual([]);
    expect(stderr).not.toContain('Bearer');
  });
});
