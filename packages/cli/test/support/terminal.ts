import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { until } from './harness';

/** A tmux server of the test's own (its own socket), so nothing touches the user's sessions. */
export function createTmux() {
  const socket = `bc-cli-test-${randomBytes(4).toString('hex')}`;
  const tmux = (...args: string[]): Promise<string> =>
    new Promise((resolve, reject) =>
      execFile('tmux', ['-L', socket, ...args], (error, stdout, stderr) =>
        error ? reject(new Error(`tmux ${args.join(' ')}: ${stderr || error.message}`)) : resolve(stdout),
      ),
    );
  const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
  return {
    /** Runs `argv` with `env` in a new 140×30 session; after it ends the pane shows `EXIT=<code>`. */
    async run(
      name: string,
      env: Record<string, string>,
      argv: string[],
    ): Promise<{ screen(): Promise<string>; screenWithEscapes(): Promise<string> }> {
      const vars = Object.entries({ ...env, TERM: 'xterm-256color' })
        .map(([key, value]) => `${key}=${quote(value)}`)
        .join(' ');
      const command = `env ${vars} ${argv.map(quote).join(' ')}; echo EXIT=$?; sleep 600`;
      await tmux('new-session', '-d', '-s', name, '-x', '140', '-y', '30', command);
      return {
        screen: () => tmux('capture-pane', '-p', '-t', name),
        screenWithEscapes: () => tmux('capture-pane', '-p', '-e', '-t', name),
      };
    },
    /** Ends the tmux server and every session of it. */
    close: () =>
      tmux('kill-server').then(
        () => undefined,
        () => undefined,
      ),
  };
}

/** Reads the screen until `check` holds (20 s at most); the error shows the last screen. */
export async function waitForScreen(
  terminal: { screen(): Promise<string> },
  check: (screen: string) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<string> {
  let last = '';
  try {
    await until(
      async () => {
        last = await terminal.screen();
        return check(last);
      },
      timeoutMs,
      what,
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}; the screen:\n${last}`);
  }
  return last;
}
