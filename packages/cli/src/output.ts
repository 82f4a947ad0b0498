import pc from 'picocolors';

type Colors = ReturnType<typeof pc.createColors>;

/** Where a command writes, and how: colour only on a TTY (and never with NO_COLOR or --no-color). */
export interface Output {
  readonly json: boolean;
  readonly quiet: boolean;
  readonly color: boolean;
  readonly tty: boolean;
  readonly c: Colors;
  out(text: string): void;
  err(text: string): void;
  /** The value as indented JSON (the `--json` shape: the API method's answer unchanged, unless documented). */
  printJson(value: unknown): void;
}

/** Whether to colour a stream: `--no-color` and `NO_COLOR` (any non-empty value) win; `FORCE_COLOR` forces; else a TTY. */
export function colorEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv, flag: boolean | undefined): boolean {
  if (flag === false) return false;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== '') return true;
  if (env.TERM === 'dumb') return false;
  return stream.isTTY === true;
}

export function createOutput(options: { json?: boolean; quiet?: boolean; color?: boolean }): Output {
  const tty = process.stdout.isTTY === true;
  const color = !options.json && colorEnabled(process.stdout, process.env, options.color);
  return {
    json: options.json === true,
    quiet: options.quiet === true,
    color,
    tty,
    c: pc.createColors(color),
    out: (text) => {
      process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    },
    err: (text) => {
      process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
    },
    printJson: (value) => {
      process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    },
  };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching ANSI escapes is the point
const ANSI = /\u001b\[[0-9;]*m/g;

/** The width a cell takes on screen (ANSI colours take none). */
export function visibleWidth(text: string): number {
  return [...text.replace(ANSI, '')].length;
}

/**
 * Aligned columns without borders (like kubectl): a header row in upper case, then each row, columns separated by two
 * spaces, the last column not padded.
 */
export function table(headers: readonly string[], rows: readonly (readonly string[])[], c?: Colors): string {
  const widths = headers.map((header, i) =>
    Math.max(visibleWidth(header), ...rows.map((row) => visibleWidth(row[i] ?? ''))),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - visibleWidth(cell))))
      .join('  ')
      .trimEnd();
  const head = line(headers.map((h) => h.toUpperCase()));
  return [c ? c.bold(head) : head, ...rows.map(line)].join('\n');
}

/** `key  value` lines, the keys aligned. */
export function keyValues(pairs: readonly (readonly [string, string])[], c?: Colors): string {
  const width = Math.max(0, ...pairs.map(([key]) => key.length));
  return pairs.map(([key, value]) => `${c ? c.dim(key.padEnd(width)) : key.padEnd(width)}  ${value}`).join('\n');
}

/** A state, coloured by what it means. */
export function colorState(state: string, c: Colors): string {
  if (/^(succeeded|ready|deployed|available|active|ok|valid)$/.test(state)) return c.green(state);
  if (/^(failed|error|retired|cancelled|revoked|invalid)$/.test(state)) return c.red(state);
  if (
    /^(running|waiting|enrolling|inspecting|commissioning|deploying|releasing|retiring|failing|cancelling)$/.test(state)
  )
    return c.cyan(state);
  if (/^(paused|held|warning|pending)$/.test(state)) return c.yellow(state);
  return state;
}

/** A cell for an optional value. */
export function cell(value: unknown): string {
  if (value === null || value === undefined || value === '') return '-';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** `k=v,k2=v2`. */
export function formatLabels(labels: unknown): string {
  if (!labels || typeof labels !== 'object') return '-';
  const entries = Object.entries(labels as Record<string, string>);
  return entries.length === 0 ? '-' : entries.map(([k, v]) => `${k}=${v}`).join(',');
}

/** Milliseconds as `850ms`, `12.3s`, `4m05s`, `2h03m`. */
export function formatDuration(ms: number): string {
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
