import { createHash, timingSafeEqual } from 'node:crypto';
import { type Compute, ComputeError } from '@better-compute/core';
import { createOpenApiDocument } from '@better-compute/core/kernel';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { HTTPException } from 'hono/http-exception';
import { requestId } from 'hono/request-id';
import { timeout } from 'hono/timeout';
import type { ServerConfig } from './config';
import type { EventStreams } from './events-sse';
import type { ServerLogger } from './logger';
import type { ServerMetrics } from './metrics';
import { renderReference } from './reference-page';

/** What `/readyz` checks; each check answers true or a reason. */
export type ReadinessCheck = () => Promise<true | string>;

/** What {@link createHttpApp} serves from. */
export interface HttpAppOptions {
  config: Pick<ServerConfig, 'corsOrigins' | 'maxBodyBytes' | 'requestTimeoutMs'> &
    Partial<Pick<ServerConfig, 'metricsToken'>>;
  log: ServerLogger;
  metrics: ServerMetrics;
  readiness: Record<string, ReadinessCheck>;
  /** The operator API; left out (the worker role), only /healthz, /readyz and /metrics are served. */
  api?: { compute: Compute; events: EventStreams };
}

type Env = { Variables: { requestId: string } };

// Compared as digests of equal length, in constant time: the scraper's token says nothing by how fast it is refused.
const digest = (text: string): Buffer => createHash('sha256').update(text).digest();
const bearerOf = (header: string | undefined): string => /^Bearer +(\S+) *$/i.exec(header ?? '')?.[1] ?? '';

function errorBody(error: ComputeError): string {
  return JSON.stringify(error.toJSON());
}

function jsonError(error: ComputeError, status: number, headers: Record<string, string> = {}): Response {
  return new Response(errorBody(error), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  });
}

/**
 * The operator-facing HTTP app (hono): `POST /v1/<group>.<method>` handed to `compute.handler`, `GET
 * /v1/openapi.json`, `GET /v1/reference` (the document as a page), `GET /v1/events` (SSE), `/healthz`, `/readyz`,
 * `/metrics`. Every answer carries `x-request-id` (the caller's, when it sent a sane one); every request is logged once
 * with its id, method, route, status and duration (never its headers, query or body). CORS only for CORS_ORIGINS;
 * bodies over MAX_BODY_BYTES are 413 and requests over REQUEST_TIMEOUT_MS are 504, both with the API's error body.
 *
 * @example
 * ```ts
 * const app = createHttpApp({ config, log, metrics, readiness, api: { compute, events } });
 * serve({ fetch: app.fetch, port: 8443 });
 * ```
 */
export function createHttpApp(options: HttpAppOptions): Hono<Env> {
  const { config, log, metrics } = options;
  const app = new Hono<Env>();
  const document = options.api
    ? createOpenApiDocument(options.api.compute.registry.apiGroups, { title: 'better-compute operator API' })
    : undefined;
  const knownRoutes = new Set(['/healthz', '/readyz', '/metrics', '/v1/openapi.json', '/v1/reference', '/v1/events']);
  for (const path of Object.keys(document?.paths ?? {})) knownRoutes.add(path);

  app.use(requestId({ limitLength: 128 }));
  app.use(async (c, next) => {
    const started = process.hrtime.bigint();
    await next();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const path = c.req.path;
    const route = knownRoutes.has(path) ? path : path.startsWith('/v1/') ? '/v1/{unknown}' : '{unmatched}';
    const status = c.res.status;
    metrics.observeRequest(route, c.req.method, status, seconds);
    const fields = { reqId: c.get('requestId'), method: c.req.method, route, status, ms: Math.round(seconds * 1000) };
    if (status >= 500) log.error(fields, 'request');
    else if (path === '/healthz' || path === '/readyz' || path === '/metrics') log.debug(fields, 'request');
    else log.info(fields, 'request');
  });
  if (config.corsOrigins.length > 0) {
    app.use(
      '/v1/*',
      cors({
        origin: config.corsOrigins.includes('*') ? '*' : config.corsOrigins,
        allowMethods: ['GET', 'POST', 'OPTIONS'],
        allowHeaders: ['authorization', 'content-type', 'last-event-id', 'x-request-id'],
        exposeHeaders: ['x-request-id'],
        maxAge: 600,
      }),
    );
  }

  app.onError((error, c) => {
    if (error instanceof HTTPException) return error.getResponse();
    log.error({ reqId: c.get('requestId'), err: error instanceof Error ? error.name : 'unknown' }, 'unhandled error');
    return jsonError(new ComputeError('INTERNAL', 'internal error', { details: { path: [] } }), 500);
  });
  app.notFound(() => jsonError(new ComputeError('NOT_FOUND', 'no such route', { details: { path: [] } }), 404));

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const results: Record<string, string> = {};
    let ready = true;
    for (const [name, check] of Object.entries(options.readiness)) {
      let outcome: true | string;
      try {
        outcome = await check();
      } catch {
        outcome = 'failed';
      }
      results[name] = outcome === true ? 'ok' : outcome;
      if (outcome !== true) ready = false;
    }
    return c.json({ status: ready ? 'ready' : 'not ready', checks: results }, ready ? 200 : 503);
  });
  const metricsToken = config.metricsToken === undefined ? undefined : digest(config.metricsToken);
  app.get('/metrics', async (c) => {
    if (metricsToken && !timingSafeEqual(digest(bearerOf(c.req.header('authorization'))), metricsToken)) {
      const refused = {
        code: 'UNAUTHENTICATED',
        message: 'the metrics need the METRICS_TOKEN bearer token',
        details: {},
      };
      return c.json(refused, 401, { 'www-authenticate': 'Bearer' });
    }
    const text = await metrics.render();
    return c.body(text, 200, { 'content-type': metrics.registry.contentType });
  });

  const api = options.api;
  if (!api || !document) return app;

  app.get('/v1/openapi.json', (c) => c.json(document));
  const page = renderReference(document);
  app.get('/v1/reference', (c) => c.html(page));
  app.get('/v1/events', (c) => api.events.handle(c));

  const tooLarge = new ComputeError('INVALID_INPUT', `the request body is larger than ${config.maxBodyBytes} bytes`, {
    details: { path: [], reason: 'body-too-large', limitBytes: config.maxBodyBytes },
  });
  const tooSlow = new ComputeError('TIMEOUT', `the request took longer than ${config.requestTimeoutMs} ms`, {
    details: { path: [] },
  });
  const unreadable = new ComputeError('INVALID_INPUT', 'the request body ended before it was complete', {
    details: { path: [], reason: 'malformed-json' },
  });
  const limitBody = bodyLimit({ maxSize: config.maxBodyBytes, onError: () => jsonError(tooLarge, 413) });
  app.use(
    '/v1/*',
    // bodyLimit reads a body of no declared length itself: a client that goes away or breaks its chunked encoding
    // mid-body is a 400, not an unhandled error (errors of the handlers after it never reach this catch).
    async (c, next) => {
      try {
        return await limitBody(c, next);
      } catch {
        return jsonError(unreadable, 400);
      }
    },
    timeout(config.requestTimeoutMs, () => new HTTPException(504, { res: jsonError(tooSlow, 504) })),
  );
  app.all('/v1/*', (c) => api.compute.handler(c.req.raw));
  return app;
}
