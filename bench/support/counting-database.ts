import type { Notification, QueryResult, Row, SqlDatabase, SqlExecutor } from '@better-compute/core';
import { commitsOnItsOwn } from '@better-compute/testkit';

/**
 * What a {@link countingDatabase} has seen. A round trip is one message exchange between the client and the server
 * that the caller waits for: every `query` (inside a transaction or not), plus BEGIN and COMMIT (or ROLLBACK) of every
 * top-level `transaction()`, plus SAVEPOINT and RELEASE (or ROLLBACK TO) of every nested one. The statement that sends
 * the notifications asked for after a commit (`notifyAfterCommit`: one per top-level transaction that asked, one per
 * call outside a transaction) is not a round trip: the PostgreSQL handle sends it without waiting for its answer. It
 * is counted apart (`notifies`, and its own line in `byText`). Notifications delivered to listeners are not counted.
 */
export interface QueryCounts {
  /** `query` calls, inside transactions or not. */
  statements: number;
  /** Top-level `transaction()` calls: two more round trips each (BEGIN, COMMIT). */
  transactions: number;
  /** Nested `transaction()` calls: two more round trips each (SAVEPOINT, RELEASE). */
  savepoints: number;
  /** Top-level statements other than plain reads: each commits on its own (counted in `statements` too). */
  autocommits: number;
  /** Statements that sent a commit's notifications after it, not waited for (not in `statements`). */
  notifies: number;
  /** Statements by their text (whitespace collapsed, cut at 100 characters), plus the BEGIN/COMMIT and savepoint pairs. */
  byText: Map<string, number>;
}

export const TRANSACTION_PAIR = 'BEGIN … COMMIT (2 per top-level transaction)';
export const SAVEPOINT_PAIR = 'SAVEPOINT … RELEASE (2 per nested transaction)';
export const NOTIFY_AFTER_COMMIT = 'NOTIFY after a commit, not waited for (not in the round trips)';

/** Commits of a count: top-level transactions and statements that commit on their own. */
export function commits(counts: Omit<QueryCounts, 'byText'>): number {
  return counts.transactions + counts.autocommits;
}

/** Round trips of a count: statements, plus two per transaction and two per savepoint. */
export function roundTrips(counts: Omit<QueryCounts, 'byText'>): number {
  return counts.statements + 2 * counts.transactions + 2 * counts.savepoints;
}

/** A copy of the counts, to subtract later. */
export function snapshot(counts: QueryCounts): QueryCounts {
  return { ...counts, byText: new Map(counts.byText) };
}

/** What happened between two snapshots. */
export function since(later: QueryCounts, earlier: QueryCounts): QueryCounts {
  const byText = new Map<string, number>();
  for (const [text, n] of later.byText) {
    const d = n - (earlier.byText.get(text) ?? 0);
    if (d > 0) byText.set(text, d);
  }
  return {
    statements: later.statements - earlier.statements,
    transactions: later.transactions - earlier.transactions,
    savepoints: later.savepoints - earlier.savepoints,
    autocommits: later.autocommits - earlier.autocommits,
    notifies: later.notifies - earlier.notifies,
    byText,
  };
}

/** A SqlDatabase that counts its statements and transactions; read `counts`. */
export interface CountingDatabase extends SqlDatabase {
  readonly counts: QueryCounts;
  /**
   * By command id: the wall time (ms) at which the statement or transaction that inserted the command was seen to
   * commit by the client, i.e. when the command became visible to agents.
   */
  readonly sentAt: Map<string, number>;
  /** By statement label (as in `counts.byText`): the milliseconds spent waiting for its answers, all told. */
  readonly busyMs: Map<string, number>;
  /**
   * With `BENCH_TRACE` set (a file path), every statement's label in order, as `ms +took label | short string
   * parameters` lines (`ms` from the handle's creation, whose wall time the first line gives), BEGIN and COMMIT of each transaction on lines of their own: the order of a few machines'
   * statements, to read what a pass does. Written by {@link writeTrace}.
   */
  readonly trace: string[] | undefined;
}

// The short string parameters of a statement (ids, keys), to follow one workflow through a trace.
function traceParams(params: readonly unknown[] | undefined): string {
  return (params ?? [])
    .filter((p): p is string => typeof p === 'string' && p.length <= 80)
    .slice(0, 4)
    .join(' ');
}

/**
 * Writes a counting handle's trace (see {@link CountingDatabase.trace}) to `BENCH_TRACE`, when set.
 */
export async function writeTrace(db: CountingDatabase): Promise<void> {
  const path = process.env.BENCH_TRACE;
  if (!path || !db.trace) return;
  const { writeFile } = await import('node:fs/promises');
  // The texts by number (the `#n` of each line), whole, so statements that share their first 100 characters (every
  // fenced write starts with its fence) can be told apart.
  const texts = [...factsByText].map(([text, facts]) => `#${facts.id} ${text.replace(/\s+/g, ' ').trim()}`);
  await writeFile(path, `${db.trace.join('\n')}\n## texts\n${texts.join('\n')}\n`);
}

const INSERTS_COMMAND = /\bINSERT INTO commands\b/;

const COMMAND_ID = /^cmd_[0-9A-Za-z]+$/;

/**
 * The command ids among a statement's parameters, when the statement inserts commands: a parameter that is an id, or
 * staged commands (JSON with an `id`, or an array of them, as core's `commit` binds them).
 */
function commandIds(facts: TextFacts, params: readonly unknown[] | undefined): string[] {
  if (!facts.insertsCommand || !params) return [];
  const ids: string[] = [];
  for (const param of params) {
    if (typeof param !== 'string') continue;
    if (COMMAND_ID.test(param)) ids.push(param);
    else if ((param.startsWith('{') || param.startsWith('[')) && param.includes('"id":"cmd_')) {
      // One staged command, or several (core's commit binds a sequence as an array).
      const parsed = JSON.parse(param) as { id?: unknown } | { id?: unknown }[];
      for (const { id } of Array.isArray(parsed) ? parsed : [parsed]) {
        if (typeof id === 'string' && COMMAND_ID.test(id)) ids.push(id);
      }
    }
  }
  return ids;
}

/** What the counter needs to know of a statement's text. */
interface TextFacts {
  label: string;
  /** The text's number in the trace's list of texts (written at its end). */
  id: number;
  commitsOnItsOwn: boolean;
  insertsCommand: boolean;
}

// The engine sends a bounded set of texts, some of them kilobytes long: read each once, so the counting costs the
// engine's process (where it runs, and whose latency is measured) a map lookup per statement, not three regexes.
const factsByText = new Map<string, TextFacts>();

function factsOf(text: string): TextFacts {
  let facts = factsByText.get(text);
  if (!facts) {
    facts = {
      label: text.replace(/\s+/g, ' ').trim().slice(0, 100),
      id: factsByText.size + 1,
      commitsOnItsOwn: commitsOnItsOwn(text),
      insertsCommand: INSERTS_COMMAND.test(text),
    };
    factsByText.set(text, facts);
  }
  return facts;
}

/**
 * Wraps a database so every statement and transaction that goes through it is counted (see {@link QueryCounts}).
 * Everything is delegated unchanged; the PGlite backend's guard against using the handle inside its own transaction
 * still sees the same async context.
 */
export function countingDatabase(db: SqlDatabase): CountingDatabase {
  const counts: QueryCounts = {
    statements: 0,
    transactions: 0,
    savepoints: 0,
    autocommits: 0,
    notifies: 0,
    byText: new Map(),
  };
  const sentAt = new Map<string, number>();
  const busyMs = new Map<string, number>();
  const bump = (key: string, by = 1) => counts.byText.set(key, (counts.byText.get(key) ?? 0) + by);
  const origin = performance.now();
  // The first line gives the wall time (ms since the epoch) the trace's times count from, to find a latency sample.
  const trace = process.env.BENCH_TRACE
    ? [`# origin ${(performance.timeOrigin + origin).toFixed(1)}; each line: ms since then, +ms the answer took`]
    : undefined;
  const note = (line: string) => trace?.push(`${(performance.now() - origin).toFixed(1)} ${line}`);
  const query = async <R = Row>(
    target: SqlExecutor,
    text: string,
    params?: readonly unknown[],
    txTag = '',
  ): Promise<QueryResult<R>> => {
    counts.statements += 1;
    const { label, id } = factsOf(text);
    bump(label);
    const line = trace ? trace.length : -1;
    const tagged = `#${id}${txTag} ${label}`;
    if (trace) note(`${tagged} | ${traceParams(params)}`);
    const started = performance.now();
    // `=n` in the trace: the rows the statement returned (an empty claim is a round trip too).
    let rows = '';
    try {
      const result = await target.query<R>(text, params);
      rows = ` =${result.rows.length}`;
      return result;
    } finally {
      const took = performance.now() - started;
      busyMs.set(label, (busyMs.get(label) ?? 0) + took);
      if (trace) {
        trace[line] = `${(started - origin).toFixed(1)} +${took.toFixed(1)} ${tagged}${rows} | ${traceParams(params)}`;
      }
    }
  };
  // The statement a notifyAfterCommit sends on the database's handle, counted and timed as any other.
  const notifyNow = async (notifications: readonly Notification[]) => {
    if (notifications.length === 0) return;
    counts.notifies += 1;
    bump(NOTIFY_AFTER_COMMIT);
    note(NOTIFY_AFTER_COMMIT);
    const started = performance.now();
    try {
      await (db.notifyAfterCommit ? db.notifyAfterCommit(notifications) : undefined);
    } finally {
      busyMs.set(NOTIFY_AFTER_COMMIT, (busyMs.get(NOTIFY_AFTER_COMMIT) ?? 0) + performance.now() - started);
    }
  };
  // `notifies.asked` is set when anything in the top-level transaction asked to notify after its commit.
  // `txTag` (` tx<n>`) marks a transaction's statements in the trace, where other passes' statements interleave.
  const wrapTx = (tx: SqlExecutor, inserted: string[], notifies: { asked: boolean }, txTag: string): SqlExecutor => ({
    query: (text, params) => {
      inserted.push(...commandIds(factsOf(text), params));
      return query(tx, text, params, txTag);
    },
    transaction: (fn) => {
      counts.savepoints += 1;
      bump(SAVEPOINT_PAIR, 2);
      note(`SAVEPOINT${txTag}`);
      return tx.transaction((inner) => fn(wrapTx(inner, inserted, notifies, txTag)));
    },
    ...(tx.notifyAfterCommit
      ? {
          notifyAfterCommit: (notifications: readonly Notification[]) => {
            if (notifications.length > 0) notifies.asked = true;
            return tx.notifyAfterCommit?.(notifications) ?? Promise.resolve();
          },
        }
      : {}),
  });
  return {
    get backend() {
      return db.backend;
    },
    counts,
    sentAt,
    busyMs,
    trace,
    async query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const facts = factsOf(text);
      if (facts.commitsOnItsOwn) counts.autocommits += 1;
      const ids = commandIds(facts, params);
      const result = await query<R>(db, text, params);
      const at = performance.timeOrigin + performance.now();
      for (const id of ids) sentAt.set(id, at);
      return result;
    },
    async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
      counts.transactions += 1;
      bump(TRANSACTION_PAIR, 2);
      const inserted: string[] = [];
      const notifies = { asked: false };
      const txTag = ` tx${counts.transactions}`;
      note(`BEGIN${txTag}`);
      const result = await db.transaction((tx) => fn(wrapTx(tx, inserted, notifies, txTag)));
      note(`COMMIT${txTag}`);
      if (notifies.asked) {
        counts.notifies += 1;
        bump(NOTIFY_AFTER_COMMIT);
      }
      const at = performance.timeOrigin + performance.now();
      for (const id of inserted) sentAt.set(id, at);
      return result;
    },
    ...(db.notifyAfterCommit ? { notifyAfterCommit: notifyNow } : {}),
    listen: (channel, handler) => db.listen(channel, handler),
    close: () => db.close(),
  };
}
