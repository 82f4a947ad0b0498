import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { generateSigningKeyPair, imageSigningBytes, signToBase64Url } from '@better-compute/pki';
import { createHttpSimSite, type HttpSimSite } from '@better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  bundleCli,
  removeBundle,
  runCli,
  type Server,
  serverEnv,
  startServer,
  tempDir,
  until,
  writeTemp,
} from './support/harness';
import { createTmux, waitForScreen } from './support/terminal';

// A deploy and a release through the CLI: the server as a child process (its provision given the user-data variables
// by a plugin config module), a simulated site whose site agent, ramdisk and installed OS speak the agent API over
// HTTPS (testkit's createHttpSimSite), a signed image in the catalog. `metal deploy --wait` runs in a real terminal
// (tmux), the timeline read while the steps move; `metal release --wait` without a terminal, one line per event.

let bin: string;
let server: Server;
let dir: Awaited<ReturnType<typeof tempDir>>;
let site: HttpSimSite;
let env: Record<string, string>;
let imageRef: string;
let nodeId: string;
const terminal = createTmux();

beforeAll(async () => {
  dir = await tempDir('bc-cli-deploy-');
  const config = await writeTemp(
    dir.path,
    'sim.config.mjs',
    `export default { provision: { userData: ${JSON.stringify({
      controlPlaneUrl: 'https://localhost:8444',
      bcdUrl: 'https://downloads.simulated.invalid/bcd/bcd-linux-amd64',
      bcdSha256: createHash('sha256').update('simulated bcd').digest('hex'),
    })} } };\n`,
  );
  [bin, server] = await Promise.all([
    bundleCli(),
    startServer(join(dir.path, 'data'), { BETTER_COMPUTE_CONFIG: config }),
  ]);
  env = serverEnv(server, join(dir.path, 'config'));
  const siteId = (await api<{ id: string }>(server, 'sites.create', { tenantId: 'root', name: 'sim' })).id;
  const { token } = await api<{ token: string }>(server, 'sites.joinToken', { tenantId: 'root', siteId });
  site = await createHttpSimSite({
    agentUrl: server.agentUrl,
    ca: server.ca,
    siteJoinToken: token,
    machines: 1,
    bootMs: 300,
    pollWaitMs: 2_000,
  });
  const key = generateSigningKeyPair('ed25519');
  await api(server, 'imageSigners.add', { tenantId: 'root', name: 'release', publicKey: key.publicKeyPem });
  const digest = `sha256:${createHash('sha256').update('ubuntu 24.04').digest('hex')}`;
  await api(server, 'images.register', {
    tenantId: 'root',
    name: 'ubuntu',
    version: '24.04',
    digest,
    signature: signToBase64Url(key.privateKeyPem, imageSigningBytes(digest)),
    url: 'https://images.simulated.invalid/ubuntu-24.04.img',
  });
  imageRef = 'ubuntu@24.04';
}, 60_000);

afterAll(async () => {
  await terminal.close();
  await site?.close();
  await server?.stop();
  await dir?.remove();
  await removeBundle(bin);
});

const cli = (args: string[]) => runCli(bin, args, env);
const state = async (id: string) => JSON.parse((await cli(['metal', 'get', id, '--json'])).stdout).state as string;

// One machine's life through the CLI (enrolled, deployed, released): the tests run in file order even when vitest
// shuffles.
describe('a machine through the CLI on a simulated site', { shuffle: false }, () => {
  it('enrolls from a file (--wait), and becomes available', { timeout: 45_000 }, async () => {
    const body = site.enrollInputs()[0];
    const file = await writeTemp(dir.path, 'machine.json', JSON.stringify({ ...body, name: 'sim-01' }));
    const run = await cli(['metal', 'enroll', '-f', file, '--wait']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    nodeId = /^(node_\S+) enrolling/m.exec(run.stdout)?.[1] as string;
    expect(run.stdout).toMatch(/^workflow wf_\S+ succeeded in \S+$/m);
    await until(async () => (await state(nodeId)) === 'available', 30_000, 'available');
  });

  it('metal deploy --wait in a terminal: the timeline shows the steps moving and ends with exit 0', {
    timeout: 45_000,
  }, async () => {
    const screen = await terminal.run('deploy', env, [
      process.execPath,
      bin,
      'metal',
      'deploy',
      nodeId,
      '--profile',
      'metal.deploy-image',
      '--image',
      imageRef,
      '--wait',
    ]);
    // Read the screen while the deploy runs: which step had the spinner, in order.
    const inFlight: string[] = [];
    const end = await waitForScreen(
      screen,
      (s) => {
        const running = /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] (main\.\d+)\s/.exec(s)?.[1];
        if (running && inFlight[inFlight.length - 1] !== running) inFlight.push(running);
        return s.includes('EXIT=');
      },
      'the end of the deploy',
      40_000,
    );
    expect(end).toMatch(/^EXIT=0$/m);
    expect(end).toMatch(new RegExp(`metal\\.deploy-image v1 {2}wf_\\S+ {2}node ${nodeId} {2}succeeded`));
    for (const step of [
      'boot the ramdisk',
      'render the user data',
      'write the image and the user data',
      'kexec into the installed OS',
    ]) {
      expect(end).toMatch(new RegExp(`✓ main\\.\\d\\s+${step}\\s+succeeded\\s+attempt 1`));
    }
    expect(end).toMatch(/^workflow wf_\S+ succeeded in \S+$/m);
    // The steps moved: several were seen in flight, in the plan's order.
    expect(inFlight.length).toBeGreaterThanOrEqual(2);
    expect([...inFlight].sort()).toEqual(inFlight);
    expect(await state(nodeId)).toBe('deployed');
  });

  it('metal release --wait without a terminal: one line per event, exit 0, the machine available again', {
    timeout: 45_000,
  }, async () => {
    const run = await cli(['metal', 'release', nodeId, '--wait']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^${nodeId} releasing: workflow (wf_\\S+) \\(metal\\.release v1\\)`, 'm'));
    expect(run.stdout).toMatch(/^\S+Z {2}workflow\.step\.started {2}main\.1 {2}\S+ {2}attempt 1$/m);
    expect(run.stdout).toMatch(/^\S+Z {2}workflow\.step\.succeeded {2}main\.\d+/m);
    expect(run.stdout).toMatch(/^workflow wf_\S+ succeeded in \S+$/m);
    await until(async () => (await state(nodeId)) === 'available', 30_000, 'available again');
  });
});
