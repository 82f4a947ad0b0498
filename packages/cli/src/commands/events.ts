import type { Output } from '../output';
import type { Handler } from '../runtime';
import { type StreamEvent, streamEvents } from '../sse';

function printEvent(out: Output, event: StreamEvent): void {
  if (out.json) {
    process.stdout.write(`${JSON.stringify(event)}\n`);
    return;
  }
  if (out.quiet) {
    out.out(event.id);
    return;
  }
  const { c } = out;
  out.out(`${c.dim(event.at)}  ${c.bold(event.type)}  ${event.subject}  ${JSON.stringify(event.data)}`);
}

/**
 * `events tail`: the last `--lines` events (one `events.list` with `fromEnd`, however long the outbox is), then with
 * `--follow` every later one from the event stream, resuming from the cursor at the end the list answered.
 */
export const tail: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const lines = (opts.lines as number | undefined) ?? 20;
  const types = opts.type as string[] | undefined;
  const subject = opts.subject as string | undefined;
  const allTenants = opts.allTenants === true;
  const newest = await client.call<{ events: StreamEvent[]; cursor: string }>('events.list', {
    fromEnd: true,
    // With no lines asked for, one event is read for the cursor and not printed.
    limit: Math.max(lines, 1),
    subjectPrefix: subject,
    types,
    allTenants: allTenants ? true : undefined,
  });
  const last = lines > 0 ? newest.events : [];
  const cursor = newest.cursor;
  for (const event of last) printEvent(rt.out, event);
  if (!opts.follow) return 0;
  const abort = new AbortController();
  process.once('SIGTERM', () => abort.abort());
  for await (const event of streamEvents(client, {
    ...(subject ? { subject } : {}),
    ...(types ? { types } : {}),
    tenantId: client.tenant,
    allTenants,
    ...(cursor ? { after: cursor } : {}),
    signal: abort.signal,
  })) {
    printEvent(rt.out, event);
  }
  return 0;
};
