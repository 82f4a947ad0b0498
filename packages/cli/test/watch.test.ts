import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  bundleCli,
  removeBundle,
  runCli,
  type Server,
  serverEnv,
  startServer,
  startSiteAgent,
  tempDir,
  until,
} from './support/harness';
import { createTmux, waitForScreen } from './support/terminal';

// `workflows watch` (and `metal enroll --wait`) in a real terminal: tmux runs the bundled bin in a pane, the test reads
// the screen with capture-pane while a site agent on the real agent API answers the workflow's BMC commands when the
// test lets it, so the timeline is seen with a step in flight, its attempts, and the end with its exit code.

let bin: string;
let server: Server;
let dir: Awaited<ReturnType<typeof tempDir>>;
let siteId: string;
let agent: Awaited<ReturnType<typeof startSiteAgent>>;
const terminal = createTmux();
/** Each BMC call waits for the test to settle it: answered in order. */
const pending: ((outcome: { result: Record<string, unknown> } | { fail: string }) => void)[] = [];

/** Runs the CLI in a new tmux session of 140×30; after it ends the pane shows `EXIT=<code>`. */
function runInTerminal(name: string, args: string[], extraEnv: Record<string, string> = {}) {
  return terminal.run(name, { ...serverEnv(server, join(dir.path, 'config')), ...extraEnv }, [
    process.execPath,
    bin,
    ...args,
  ]);
}

beforeAll(async () => {
  dir = await tempDir('bc-cli-watch-');
  [bin, server] = await Promise.all([bundleCli(), startServer(join(dir.path, 'data'))]);
  siteId = (await api<{ id: string }>(server, 'sites.create', { tenantId: 'root', name: 'dc-1' })).id;
  agent = await startSiteAgent(server, siteId, () => new Promise((resolve) => pending.push(resolve)));
}, 60_000);

afterAll(async () => {
  await terminal.close();
  for (const settle of pending.splice(0)) settle({ fail: 'the test ended' });
  await agent?.stop();
  await server?.stop();
  await dir?.remove();
  await removeBundle(bin);
});

async function enroll(name: string, mac: string): Promise<{ nodeId: string; workflowId: string }> {
  const machine = await api<{ nodeId: string; workflow: { id: string } }>(server, 'metal.enroll', {
    tenantId: 'root',
    siteId,
    name,
    bmc: { address: `10.0.1.${mac.slice(-1)}`, driver: 'redfish' },
    macs: [mac],
    holdAfter: 'enrolling',
  });
  return { nodeId: machine.nodeId, workflowId: machine.workflow.id };
}

describe('workflows watch in a terminal', () => {
  it('draws the timeline live: the step in flight with a spinner and its elapsed time, then the end, exit 0', async () => {
    const { workflowId } = await enroll('gpu-01', '0c:42:a1:00:01:01');
    const screen = await runInTerminal('watch-ok', ['workflows', 'watch', workflowId]);

    // The step is in flight: the agent holds the BMC call.
    await until(() => pending.length > 0, 20_000, 'the BMC call');
    const first = await waitForScreen(
      screen,
      (s) => /main\.1\s+BMC reachable: read the power state\s+running\s+attempt 1\s+\d/.test(s),
      'the running step',
    );
    expect(first).toMatch(new RegExp(`metal\\.enroll v1 {2}${workflowId} {2}node node_\\S+ {2}[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] running`));
    const spinner = /([⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]) main\.1/.exec(first)?.[1];
    expect(spinner).toBeDefined();
    // The spinner turns and the elapsed time grows while the step runs; the timeline is redrawn in place.
    const later = await waitForScreen(
      screen,
      (s) => (/([⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]) main\.1/.exec(s)?.[1] ?? spinner) !== spinner,
      'the spinner to turn',
    );
    expect(later.match(/main\.1/g)).toHaveLength(1);
    expect(later).not.toContain('EXIT=');

    pending.shift()?.({ result: { state: 'on' } });
    const end = await waitForScreen(screen, (s) => s.includes('EXIT='), 'the end');
    expect(end).toMatch(/✓ main\.1\s+BMC reachable: read the power state\s+succeeded\s+attempt 1\s+\d/);
    expect(end).toMatch(new RegExp(`^workflow ${workflowId} succeeded in \\S+$`, 'm'));
    expect(end).toMatch(/^EXIT=0$/m);
    expect(end).not.toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/);
  });

  it('metal enroll --wait: a retried step shows its attempts, and a failed workflow exits 8', async () => {
    const screen = await runInTerminal('wait-fail', [
      'metal',
      'enroll',
      '--site',
      siteId,
      '--name',
      'gpu-02',
      '--bmc',
      '10.0.1.2',
      '--driver',
      'ipmi',
      '--mac',
      '0c:42:a1:00:01:02',
      '--hold-after',
      'enrolling',
      '--wait',
    ]);
    await until(() => pending.length > 0, 20_000, 'the first BMC call');
    await waitForScreen(screen, (s) => /main\.1\s+.*running\s+attempt 1/.test(s), 'attempt 1');
    pending.shift()?.({ fail: 'BMC 10.0.1.2 is unreachable' });
    await until(() => pending.length > 0, 20_000, 'the second BMC call');
    await waitForScreen(screen, (s) => /main\.1\s+.*running\s+attempt 2/.test(s), 'attempt 2');
    pending.shift()?.({ fail: 'BMC 10.0.1.2 is unreachable' });
    await until(() => pending.length > 0, 20_000, 'the third BMC call');
    await waitForScreen(screen, (s) => /main\.1\s+.*running\s+attempt 3/.test(s), 'attempt 3');
    pending.shift()?.({ fail: 'BMC 10.0.1.2 is unreachable' });
    const end = await waitForScreen(screen, (s) => s.includes('EXIT='), 'the end');
    expect(end).toMatch(
      /✗ main\.1\s+BMC reachable: read the power state\s+failed\s+attempt 3\s+\S+\s+DRIVER_ERROR command driver\.invoke failed/,
    );
    expect(end).toMatch(/^workflow wf_\S+ failed in \S+: DRIVER_ERROR main\.1 \(power\.getPower\)/m);
    expect(end).toMatch(/^EXIT=8$/m);
  });

  it('pause and resume show in the timeline; metal abort while it is watched ends it cancelled, exit 9', async () => {
    const { nodeId, workflowId } = await enroll('gpu-03', '0c:42:a1:00:01:03');
    const screen = await runInTerminal('watch-abort', ['workflows', 'watch', workflowId, '--node', nodeId]);
    await until(() => pending.length > 0, 20_000, 'the BMC call');
    await waitForScreen(screen, (s) => /main\.1\s+.*running\s+attempt 1/.test(s), 'the running step');
    const cliEnv = serverEnv(server, join(dir.path, 'config'));
    const paused = await runCli(bin, ['workflows', 'pause', workflowId], cliEnv);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout.trim()).toBe(`${workflowId} paused`);
    await waitForScreen(
      screen,
      (s) => new RegExp(`${workflowId} {2}node node_\\S+ {2}[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] paused`).test(s),
      'paused',
    );
    const resumed = await runCli(bin, ['workflows', 'resume', workflowId, '--json'], cliEnv);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({
      id: workflowId,
      state: expect.stringMatching(/running|pending/),
    });
    const abort = await runCli(
      bin,
      ['metal', 'abort', nodeId, '--reason', 'wrong rack'],
      serverEnv(server, join(dir.path, 'config')),
    );
    expect(abort.code, abort.stderr).toBe(0);
    const end = await waitForScreen(screen, (s) => s.includes('EXIT='), 'the end');
    expect(end).toMatch(new RegExp(`^workflow ${workflowId} cancelled in \\S+`, 'm'));
    expect(end).toMatch(/^EXIT=9$/m);
    pending.shift()?.({ fail: 'aborted' });
  });

  it('colours on a terminal only, and never with NO_COLOR', async () => {
    const coloured = await runInTerminal('colour', ['sites', 'list']);
    const withColour = await waitForScreen(coloured, (s) => s.includes('EXIT='), 'sites list');
    expect(withColour).toMatch(/^SITE\s+NAME/m);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for the escape itself
    expect(await coloured.screenWithEscapes()).toMatch(/\u001b\[1mSITE/);
    const plain = await runInTerminal('no-colour', ['sites', 'list'], { NO_COLOR: '1' });
    await waitForScreen(plain, (s) => s.includes('EXIT='), 'sites list with NO_COLOR');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for the escape itself
    expect(await plain.screenWithEscapes()).not.toMatch(/\u001b\[1m/);
    const piped = await runCli(bin, ['sites', 'list'], serverEnv(server, join(dir.path, 'config')));
    expect(piped.stdout).toMatch(/^SITE\s+NAME/m);
    expect(piped.stdout).not.toContain('\u001b');
  });
});
