import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { ModuleContext } from '../kernel/module';

/** The resource a method is decided on, e.g. `{ type: 'compute-node', tenantId, id }`. */
export interface ResourceRef {
  type: string;
  tenantId: string;
  id?: string;
}

/** Who is calling: the tenant a credential is bound to and its permissions. */
export interface Principal {
  credentialId: string;
  tenantId: string;
  permissions: readonly string[];
}

/** What a handler receives besides its input. */
export interface ApiCallContext extends ModuleContext {
  principal: Principal;
  resource: ResourceRef;
}

/**
 * One API method: an input schema (valibot or any Standard Schema), the permission it needs, the resource it is
 * decided on, and the handler.
 *
 * @example
 * ```ts
 * const get: ApiMethod<{ tenantId: string; nodeId: string }, Node> = {
 *   input: v.object({ tenantId: v.string(), nodeId: v.string() }),
 *   permission: 'compute:nodes:read',
 *   resource: async (input, ctx) => ({ type: 'compute-node', tenantId: input.tenantId, id: input.nodeId }),
 *   handler: async (input, ctx) => loadNode(ctx.sql, input.nodeId),
 * };
 * ```
 */
export interface ApiMethod<I = unknown, O = unknown> {
  readonly input: StandardSchemaV1<unknown, I>;
  readonly permission: string;
  readonly resource: (input: I, ctx: ModuleContext) => Promise<ResourceRef>;
  readonly handler: (input: I, ctx: ApiCallContext) => Promise<O>;
  readonly description?: string;
}

/** A group of methods, mounted as `compute.api.<group>.<method>` and `POST /v1/<group>.<method>`. */
// biome-ignore lint/suspicious/noExplicitAny: a group holds methods of many input and output types
export type ApiGroup = Readonly<Record<string, ApiMethod<any, any>>>;
