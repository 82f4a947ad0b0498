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
 * `events tail`: the last `--lines` events (read with `events.list` to the end of the outbox), then with `--follow`
 * every later one from the event stream, resuming from the cursor where the list ended.
 */
export const tail: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const lines = (opts.lines as number | undefined) ?? 20;
  const types = opts.type as string[] | undefined;
  const subject = opts.subject as string | undefined;
  const allTenants = opts.allTenants === true;
  let cursor: string | undefined;
  const last: StreamEvent[] = [];
  // Read to the end of the outbox, keeping the last `lines`; the cursor is where the stream resumes.
  for (let page = 0; ; page += 1) {
    const answer = await client.call<{ events: StreamEvent[]; cursor: string | null }>('events.list', {
      after: cursor,
      limit: 1000,
      subjectPrefix: subject,
      types,
      allTenants: allTenants ? true : undefined,
    });
    if (lines > 0) {
      last.push(...answer.events);
      if (last.length > lines) last.splice(0, last.length - lines);
    }
    if (!answer.cursor || answer.cursor === cursor) break;
    cursor = answer.cursor;
    if (answer.events.length === 0 && page > 0) {
    }
  }
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
