import { execFile } from 'node:child_process';
import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bundleCli, removeBundle, tempDir } from './support/harness';

// The completion scripts run in the shells they are for: fish through `complete -C`, zsh in a real terminal (tmux),
// where a Tab after the words typed so far completes them.

let bin: string | undefined;
let dir: Awaited<ReturnType<typeof tempDir>>;

function run(file: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { env }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  bin = await bundleCli();
  dir = await tempDir('bc-completion-');
  for (const shell of ['fish', 'zsh']) {
    await writeFile(join(dir.path, `completion.${shell}`), await run(process.execPath, [bin, 'completion', shell]));
  }
  // A stand-in on PATH, so the shells know the command exists.
  await writeFile(join(dir.path, 'better-compute'), '#!/bin/sh\nexit 0\n');
  await chmod(join(dir.path, 'better-compute'), 0o755);
}, 60_000);

afterAll(async () => {
  await removeBundle(bin);
  await dir?.remove();
});

it('fish completes the command groups, their commands and their flags', async () => {
  const complete = async (line: string) =>
    (await run('fish', ['-c', `source ${dir.path}/completion.fish; complete -C '${line}'`]))
      .trim()
      .split('\n')
      .map((entry) => entry.split('\t')[0]);
  expect(await complete('better-compute me')).toEqual(['metal']);
  expect(await complete('better-compute metal dep')).toEqual(['deploy']);
  expect(await complete('better-compute metal list --sel')).toEqual(['--selector']);
});

it('zsh completes a command and a flag on Tab in a real terminal', async () => {
  const session = `bc-zsh-${process.pid}`;
  const env = { HOME: dir.path, PATH: `${dir.path}:/usr/bin:/bin`, TERM: 'xterm' };
  const shell = `env -i ${Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')} zsh -f`;
  await run('tmux', ['new-session', '-d', '-s', session, '-x', '120', '-y', '20', shell]);
  try {
    const screen = async () => run('tmux', ['capture-pane', '-p', '-t', session]);
    const type = async (keys: string[]) => run('tmux', ['send-keys', '-t', session, ...keys]);
    const waitFor = async (pattern: RegExp) => {
      for (let i = 0; i < 100 && !pattern.test(await screen()); i++) await sleep(100);
      return screen();
    };
    await type([`autoload -U compinit; compinit -u; source ${dir.path}/completion.zsh; echo sourced`, 'Enter']);
    await waitFor(/^sourced$/m);
    await type(['better-compute metal de']);
    await waitFor(/better-compute metal de$/m);
    await type(['Tab']);
    expect(await waitFor(/better-compute metal deploy/)).toMatch(/better-compute metal deploy/);
    await type(['C-u', 'better-compute metal list --sel']);
    await waitFor(/metal list --sel$/m);
    await type(['Tab']);
    expect(await waitFor(/metal list --selector/)).toMatch(/metal list --selector/);
  } finally {
    await run('tmux', ['kill-session', '-t', session]).catch(() => undefined);
  }
}, 30_000);
