import { ComputeError, isComputeError } from '../errors';
import { findUnstorableText, storableTextProblem } from '../json/storable-text';
import type { ModuleContext } from '../kernel/module';
import { validateInput } from '../manifest/validate-input';
import type { SqlExecutor } from '../sql/executor';
import { authorize } from './authorize';
import { apiCallError } from './call-error';
import { authenticate } from './credentials';
import { listApiMethods } from './define';
import type { ApiClient, ApiGroup, ApiMethod } from './types';

/** What `createApi` takes. */
export interface CreateApiOptions<G extends Readonly<Record<string, ApiGroup>>> {
  groups: G;
  /** The context handlers get; called once per call. Its `clock` decides credential expiry. */
  makeContext: () => ModuleContext;
  /** Where credentials are looked up. */
  sql: SqlExecutor;
}

/** One call as a transport hands it over: the input is read only once the credential is accepted. */
export interface ApiDispatchRequest {
  group: string;
  method: string;
  credential: string;
  readInput: () => Promise<unknown> | unknown;
}

/** The API of a set of groups: the typed client and the untyped entry points transports use. */
export interface ApiDispatcher<G extends Readonly<Record<string, ApiGroup>> = Readonly<Record<string, ApiGroup>>> {
  readonly api: ApiClient<G>;
  readonly groups: G;
  /** The method mounted as `<group>.<method>`, if any. */
  find(group: string, method: string): ApiMethod | undefined;
  /** Calls `<group>.<method>` with a bearer token and an input; an unknown method is NOT_FOUND. */
  call(group: string, method: string, credential: string, input: unknown): Promise<unknown>;
  /** Like `call`, reading the input after authentication (HTTP reads the body then). */
  dispatch(request: ApiDispatchRequest): Promise<unknown>;
}

// Every method's input ends up in a query or a row, and PostgreSQL refuses a NUL (and jsonb a lone surrogate) as an
// internal error; refusing them here, before any schema, resolver or handler, covers every method at once.
function checkInputText(raw: unknown): unknown {
  const issue = findUnstorableText(raw);
  if (issue === undefined) return raw;
  // The path goes into the message only when it is printable: an offending key stays in details.path alone.
  const printable = issue.path.length > 0 && storableTextProblem(issue.path.join('.')) === undefined;
  const where = printable ? ` at ${issue.path.join('.')}` : '';
  throw new ComputeError('INVALID_INPUT', `invalid input${where}: ${issue.message}`, {
    details: { path: issue.path, issues: [{ path: issue.path, message: issue.message, code: 'INVALID_INPUT' }] },
  });
}

/**
 * Mounts API groups. Every call runs in this order: authenticate the bearer token → refuse text PostgreSQL cannot
 * store anywhere in the input (INVALID_INPUT at its path) → validate the input against the method's schema → resolve
 * the resource → authorize → the handler. ComputeErrors pass through; anything else thrown becomes INTERNAL with a
 * generic message and the original as `cause`. A malformed group or method is INVALID_CONFIG.
 *
 * @example
 * ```ts
 * const dispatcher = createApi({ groups: { workflows }, makeContext: () => ctx, sql: db });
 * const { items } = await dispatcher.api.workflows.list(token, { tenantId: 'root', nodeId, limit: 20 });
 * await dispatcher.call('workflows', 'abort', token, { tenantId: 'root', nodeId, workflowId });
 * ```
 */
export function createApi<const G extends Readonly<Record<string, ApiGroup>>>(
  options: CreateApiOptions<G>,
): ApiDispatcher<G> {
  if (typeof options?.makeContext !== 'function') {
    throw new ComputeError('INVALID_CONFIG', 'makeContext must be a function', { details: { path: ['makeContext'] } });
  }
  if (typeof options.sql?.query !== 'function') {
    throw new ComputeError('INVALID_CONFIG', 'sql must be a SqlExecutor', { details: { path: ['sql'] } });
  }
  const { makeContext, sql } = options;
  const methods = new Map<string, ApiMethod>();
  const client: Record<string, Record<string, (credential: string, input: unknown) => Promise<unknown>>> = {};
  for (const [groupName, methodName, method] of listApiMethods(options.groups)) {
    // Names carry no dots, so no two (group, method) pairs share a key.
    methods.set(`${groupName}.${methodName}`, method);
    client[groupName] ??= {};
    client[groupName][methodName] = (credential, input) =>
      dispatch({ group: groupName, method: methodName, credential, readInput: () => input });
  }
  for (const groupName of Object.keys(options.groups)) client[groupName] ??= {};

  const find = (group: string, method: string) => methods.get(`${group}.${method}`);

  async function run(request: ApiDispatchRequest, method: ApiMethod): Promise<unknown> {
    const ctx = makeContext();
    const principal = await authenticate(sql, request.credential, ctx.clock);
    const input = await validateInput(method.input, checkInputText(await request.readInput()));
    const resource = await method.resource(input, ctx);
    authorize(principal, method.permission, resource);
    try {
      return await method.handler(input, { ...ctx, principal, resource });
    } catch (error) {
      if (!isComputeError(error)) {
        // The name only: an unknown error's message may carry a secret or an internal detail.
        const name = error instanceof Error ? error.name : typeof error;
        ctx.log.error('API handler failed', { method: `${request.group}.${request.method}`, error: name });
      }
      throw error;
    }
  }

  async function dispatch(request: ApiDispatchRequest): Promise<unknown> {
    const method = find(request.group, request.method);
    if (!method) {
      throw new ComputeError('NOT_FOUND', `no API method ${request.group}.${request.method}`, {
        details: { path: ['method'] },
      });
    }
    try {
      return await run(request, method);
    } catch (error) {
      throw apiCallError(error);
    }
  }

  const api = Object.freeze(
    Object.fromEntries(Object.entries(client).map(([name, group]) => [name, Object.freeze(group)])),
  ) as unknown as ApiClient<G>;
  return Object.freeze({
    api,
    groups: options.groups,
    find,
    call: (group: string, method: string, credential: string, input: unknown) =>
      dispatch({ group, method, credential, readInput: () => input }),
    dispatch,
  });
}
