type Json = Record<string, unknown>;

const escapeHtml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

interface Operation {
  path: string;
  operationId: string;
  group: string;
  description?: string;
  permission?: string;
  schema: unknown;
}

function operations(document: Json): Operation[] {
  const paths = (document.paths ?? {}) as Record<string, { post?: Json }>;
  const list: Operation[] = [];
  for (const [path, item] of Object.entries(paths)) {
    const post = item.post;
    if (!post) continue;
    const content = (post.requestBody as Json | undefined)?.content as Record<string, Json> | undefined;
    list.push({
      path,
      operationId: String(post.operationId ?? path),
      group: String((post.tags as string[] | undefined)?.[0] ?? 'api'),
      ...(typeof post.description === 'string' ? { description: post.description } : {}),
      ...(typeof post['x-permission'] === 'string' ? { permission: post['x-permission'] as string } : {}),
      schema: content?.['application/json']?.schema ?? {},
    });
  }
  return list.sort((a, b) => a.operationId.localeCompare(b.operationId));
}

/**
 * A readable, self-contained HTML reference of the operator API, rendered from its OpenAPI document: how to call a
 * method, the error body, the event stream, then every method by group with its permission, description and input
 * schema. No script and no external resource.
 *
 * @example
 * ```ts
 * app.get('/v1/reference', (c) => c.html(renderReference(document)));
 * ```
 */
export function renderReference(document: Json): string {
  const info = (document.info ?? {}) as { title?: string; version?: string };
  const ops = operations(document);
  const groups = [...new Set(ops.map((op) => op.group))];
  const toc = groups.map((group) => `<li><a href="#group-${escapeHtml(group)}">${escapeHtml(group)}</a></li>`).join('');
  const sections = groups
    .map((group) => {
      const methods = ops
        .filter((op) => op.group === group)
        .map(
          (op) => `<section class="op" id="${escapeHtml(op.operationId)}">
<h3><span class="verb">POST</span> <code>${escapeHtml(op.path)}</code></h3>
${op.description ? `<p>${escapeHtml(op.description)}</p>` : ''}
${op.permission ? `<p>Permission: <code>${escapeHtml(op.permission)}</code></p>` : ''}
<details><summary>Input (JSON Schema)</summary><pre>${escapeHtml(JSON.stringify(op.schema, null, 2))}</pre></details>
</section>`,
        )
        .join('\n');
      return `<h2 id="group-${escapeHtml(group)}">${escapeHtml(group)}</h2>\n${methods}`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(info.title ?? 'API')} reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}
code,pre{font:13px/1.4 ui-monospace,monospace}pre{background:#f4f4f4;padding:.75rem;overflow:auto}
.op{border-top:1px solid #ddd;padding:.5rem 0}.verb{background:#2b6;color:#fff;padding:0 .4rem;border-radius:3px}
h3{margin:.3rem 0}
</style></head><body>
<h1>${escapeHtml(info.title ?? 'API')} <small>v${escapeHtml(String(info.version ?? ''))}</small></h1>
<p>Every method is <code>POST /v1/&lt;group&gt;.&lt;method&gt;</code> with <code>Authorization: Bearer &lt;token&gt;</code>
and a JSON body; the answer is 200 with the JSON result. An error answers <code>{ code, message, details }</code>
(<code>details.path</code> names the offending field) with 400 INVALID_INPUT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED,
404 NOT_FOUND, 405 (not POST), 409 CONFLICT / INVALID_STATE, 413 (body too large), 504 TIMEOUT or 500 INTERNAL. The
machine-readable document is <a href="/v1/openapi.json"><code>/v1/openapi.json</code></a>.</p>
<p>Events: <code>GET /v1/events</code> (Server-Sent Events, permission <code>compute:events:read</code>), filters
<code>?subject=&lt;prefix&gt;</code> and <code>?type=&lt;type&gt;</code>; resume with the <code>Last-Event-ID</code>
header.</p>
<ul>${toc}</ul>
${sections}
</body></html>
`;
}
