import { type ChildProcess, fork } from 'node:child_process';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Completion } from './bulk-agents';

interface Report {
  completed: [string, Completion][];
  errors: number;
  lastError?: string;
}

/**
 * {@link BulkAgents} in a child process (`agents-child.ts`) on its own pool, as remote agents would be: they no longer
 * share the engine's Node.js thread, only the machine, and at `nice` they yield its cores to the engine and the
 * server. Same surface as BulkAgents; `start` resolves once the child answers commands, and `stop` collects what it
 * did.
 */
export class AgentsProcess {
  readonly completed = new Map<string, Completion>();
  errors = 0;
  lastError: unknown;
  #child: ChildProcess | undefined;
  #stopped: Promise<void> | undefined;

  constructor(
    private readonly url: string,
    private readonly kind: string,
    private readonly concurrency: number,
    private readonly thinkMs = 0,
    /** The child's niceness (0–19). */
    private readonly nice = 0,
  ) {}

  start(): Promise<void> {
    const file = fileURLToPath(new URL('./agents-child.ts', import.meta.url));
    const child = fork(file, [this.url, this.kind, String(this.concurrency), String(this.thinkMs)], {
      stdio: 'inherit',
    });
    this.#child = child;
    // The agents stand for machines elsewhere: their client work yields the shared cores to the control plane (their
    // statements still run on the server like anyone's).
    if (child.pid !== undefined) setPriority(child.pid, this.nice);
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`the agents' process exited early (${code})`)));
      child.once('message', (message) => (message === 'ready' ? resolve() : reject(new Error(String(message)))));
    });
  }

  stop(): Promise<void> {
    const child = this.#child;
    if (!child) return Promise.resolve();
    this.#stopped ??= new Promise<void>((resolve) => {
      child.removeAllListeners('exit');
      child.once('exit', () => resolve());
      child.on('message', (message) => {
        if (typeof message !== 'object' || message === null) return;
        const report = message as Report;
        for (const [id, completion] of report.completed) this.completed.set(id, completion);
        this.errors = report.errors;
        this.lastError = report.lastError;
      });
      child.send('stop');
    });
    return this.#stopped;
  }
}
