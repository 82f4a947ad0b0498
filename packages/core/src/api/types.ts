import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { ErrorPath } from '../errors';
import type { ModuleContext } from '../kernel/module';

/**
 * A permission a method needs: `compute:<area>:<verb>`, lower-case letters, digits and hyphens, e.g.
 * `compute:workflows:read`. Credentials may also hold the wildcard grants `compute:*` and `compute:<area>:*`.
 *
 * @example
 * ```ts
 * const permission: ApiPermission = 'compute:workflows:manage';
 * ```
 */
export type ApiPermission = `compute:${string}:${string}`;

/**
 * The resource a method is decided on, e.g. `{ type: 'compute-node', tenantId, id, kind: 'machine' }`. `path` names the
 * input field that identified it; a NOT_FOUND for the resource carries it as `details.path`.
 *
 * @example
 * ```ts
 * const ref: ResourceRef = { type: 'compute-node', tenantId: 'acme', id: 'node_01k…', path: ['nodeId'] };
 * ```
 */
export interface ResourceRef {
  type: string;
  tenantId: string;
  id?: string;
  kind?: string;
  path?: ErrorPath;
}

/**
 * Who is calling: the credential, the tenant it is bound to and its permission grants.
 *
 * @example
 * ```ts
 * const principal = await authenticate(sql, token, clock);
 * principal.tenantId; // 'acme'
 * ```
 */
export interface Principal {
  credentialId: string;
  tenantId: string;
  permissions: readonly string[];
}

/**
 * What a handler receives besides its input: the module context, the authenticated principal and the resolved resource.
 *
 * @example
 * ```ts
 * handler: async (input, ctx: ApiCallContext) => ({ caller: ctx.principal.credentialId, node: ctx.resource.id })
 * ```
 */
export interface ApiCallContext extends ModuleContext {
  principal: Principal;
  resource: ResourceRef;
}

/**
 * One API method: an input schema (valibot or any Standard Schema), the permission it needs, the resource it is
 * decided on, and the handler. `I` is the validated input, `O` the result, `Raw` what a caller passes (the schema's
 * input type). Make one with `defineApiMethod`.
 *
 * @example
 * ```ts
 * const get: ApiMethod<{ tenantId: string; nodeId: string }, { id: string }> = defineApiMethod({
 *   input: v.object({ tenantId: v.string(), nodeId: v.string() }),
 *   permission: 'compute:nodes:read',
 *   resource: (input, ctx) => resolveNodeResource(ctx.sql, input.tenantId, input.nodeId),
 *   handler: async (input) => ({ id: input.nodeId }),
 * });
 * ```
 */
export interface ApiMethod<I = unknown, O = unknown, Raw = I> {
  readonly input: StandardSchemaV1<Raw, I>;
  readonly permission: ApiPermission;
  /** Finds the resource the call is decided on; throws NOT_FOUND (see `resourceNotFound`) when there is none. */
  readonly resource: (input: I, ctx: ModuleContext) => Promise<ResourceRef>;
  readonly handler: (input: I, ctx: ApiCallContext) => Promise<O>;
  readonly description?: string;
}

/**
 * A group of methods, mounted as `compute.api.<group>.<method>` and `POST /v1/<group>.<method>`. Make one with
 * `defineApiGroup`.
 *
 * @example
 * ```ts
 * const workflows: ApiGroup = defineApiGroup('workflows', { get, list });
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: a group holds methods of many input and output types
export type ApiGroup = Readonly<Record<string, ApiMethod<any, any, any>>>;

/**
 * The typed client of a set of groups: `api.<group>.<method>(credential, input)`, where `credential` is the bearer
 * token and `input` what the method's schema accepts.
 *
 * @example
 * ```ts
 * const { api } = createApi({ groups: { workflows }, makeContext, sql });
 * const wf = await api.workflows.get(token, { tenantId: 'root', nodeId, workflowId });
 * ```
 */
export type ApiClient<G extends Readonly<Record<string, ApiGroup>>> = {
  readonly [Group in keyof G]: {
    readonly [Method in keyof G[Group]]: G[Group][Method] extends ApiMethod<infer _I, infer O, infer Raw>
      ? (credential: string, input: Raw) => Promise<O>
      : never;
  };
};
