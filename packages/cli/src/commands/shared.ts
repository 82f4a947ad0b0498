import { readFile } from 'node:fs/promises';
import type { ApiClient } from '../client';
import { CliError, usage } from '../errors';
import type { Output } from '../output';

/** A page of a list method. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** Reads a list method's pages: one (`--limit`, `--cursor`) or, with `--all`, every one. */
export async function readPages<T>(
  client: ApiClient,
  method: string,
  input: Record<string, unknown>,
  opts: Record<string, unknown>,
): Promise<Page<T>> {
  const items: T[] = [];
  let cursor = opts.cursor as string | undefined;
  for (;;) {
    const page = await client.call<Page<T>>(method, { ...input, limit: opts.limit, cursor });
    items.push(...page.items);
    if (!opts.all || !page.nextCursor) return { items, nextCursor: page.nextCursor };
    cursor = page.nextCursor;
  }
}

/** Prints a page: `--json` the page as the method answers it, `-q` the ids, else the table and where the next page is. */
export function printPage<T>(
  out: Output,
  page: Page<T>,
  id: (item: T) => string,
  render: () => string,
  empty: string,
): void {
  if (out.json) out.printJson(page);
  else if (out.quiet) {
    for (const item of page.items) out.out(id(item));
  } else {
    out.out(page.items.length === 0 ? empty : render());
    if (page.nextCursor) out.err(`more: --cursor ${page.nextCursor} (or --all)`);
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Reads a file's text (`-` for stdin); a missing or unreadable file is a usage error naming the flag. */
export async function readText(file: string, flag: string): Promise<string> {
  if (file === '-') return readStdin();
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory' : (code ?? 'unreadable');
    throw usage(`cannot read ${file}: ${why}`, [flag]);
  }
}

/**
 * A YAML or JSON document from a file (JSON is YAML; both parse with the yaml library). Malformed text is a usage
 * error with the line and column.
 */
export async function readDocument(file: string, flag: string): Promise<unknown> {
  const text = await readText(file, flag);
  const { parseDocument } = await import('yaml');
  const document = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  const problem = document.errors[0];
  if (problem) {
    const at = problem.linePos?.[0];
    const where = at ? ` at line ${at.line}, column ${at.col}` : '';
    const message = (problem.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
    throw usage(`${file} is not valid YAML or JSON${where}: ${message}`, [flag]);
  }
  const value = document.toJS() as unknown;
  if (value === null || value === undefined) throw usage(`${file} is empty`, [flag]);
  return value;
}

/** `key=value` pairs into an object (a usage error for anything else). */
export function parsePairs(pairs: readonly string[] | undefined, flag: string): Record<string, string> | undefined {
  if (!pairs) return undefined;
  const result: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw usage(`${pair} is not key=value`, [flag]);
    result[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return result;
}

/**
 * The node of a workflow, which the workflows API methods take: `--node` when given, else the `nodeId` of the
 * workflow's `workflow.created` event (read with `events.list`, from the start of the outbox).
 */
export async function workflowNode(client: ApiClient, workflowId: string, node: unknown): Promise<string> {
  if (typeof node === 'string' && node !== '') return node;
  let after: string | undefined;
  for (let page = 0; page < 200; page += 1) {
    const answer = await client.call<{ events: { data: { nodeId?: string } }[]; cursor: string | null }>(
      'events.list',
      { subjectPrefix: `workflow/${workflowId}`, types: ['workflow.created'], limit: 1000, after },
    );
    const found = answer.events.find((event) => typeof event.data?.nodeId === 'string');
    if (found) return found.data.nodeId as string;
    if (!answer.cursor || answer.cursor === after) break;
    after = answer.cursor;
  }
  throw new CliError('NOT_FOUND', `workflow ${workflowId} not found (or it has no node: pass --node)`, {
    path: ['workflowId'],
  });
}
