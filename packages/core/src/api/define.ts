import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ComputeError, type ErrorPath } from '../errors';
import type { ModuleContext } from '../kernel/module';
import { isStandardSchema } from '../manifest/validate-input';
import { isApiPermission } from './permissions';
import type { ApiCallContext, ApiGroup, ApiMethod, ApiPermission, ResourceRef } from './types';

/** What `defineApiMethod` takes. */
export interface ApiMethodDefinition<S extends StandardSchemaV1, O> {
  input: S;
  permission: ApiPermission;
  resource: (input: StandardSchemaV1.InferOutput<S>, ctx: ModuleContext) => Promise<ResourceRef>;
  handler: (input: StandardSchemaV1.InferOutput<S>, ctx: ApiCallContext) => Promise<O>;
  description?: string;
}

// Group and method names become `api.<group>.<method>` and `/v1/<group>.<method>`: identifiers without dots, so two
// different pairs can never spell the same route.
const NAME = /^[a-z][a-zA-Z0-9]{0,62}$/;

const groupNames = new WeakMap<object, string>();

function invalid(message: string, path: ErrorPath): ComputeError {
  return new ComputeError('INVALID_CONFIG', message, { details: { path } });
}

function assertApiMethod(value: unknown, path: ErrorPath): asserts value is ApiMethod {
  if (typeof value !== 'object' || value === null) throw invalid('an API method must be an object', path);
  const method = value as Record<string, unknown>;
  if (!isStandardSchema(method.input)) {
    throw invalid('input must be a valibot schema or another Standard Schema', [...path, 'input']);
  }
  if (!isApiPermission(method.permission)) {
    throw invalid(
      `permission must look like compute:<area>:<verb> (lower-case, no wildcard): ${String(method.permission)}`,
      [...path, 'permission'],
    );
  }
  if (typeof method.resource !== 'function') throw invalid('resource must be a function', [...path, 'resource']);
  if (typeof method.handler !== 'function') throw invalid('handler must be a function', [...path, 'handler']);
  if (method.description !== undefined && typeof method.description !== 'string') {
    throw invalid('description must be a string', [...path, 'description']);
  }
}

/**
 * Defines one API method, checked and frozen: an input schema (valibot or any Standard Schema), the permission it
 * needs (`compute:<area>:<verb>`), the resolver of the resource it is decided on, and the handler. A malformed
 * definition is INVALID_CONFIG with `details.path`.
 *
 * @example
 * ```ts
 * const get = defineApiMethod({
 *   input: v.object({ tenantId: v.string(), nodeId: v.string(), workflowId: v.string() }),
 *   permission: 'compute:workflows:read',
 *   resource: (input, ctx) => resolveNodeResource(ctx.sql, input.tenantId, input.nodeId),
 *   handler: async (input, ctx) => loadWorkflow(ctx.sql, input.workflowId),
 *   description: 'One workflow of a node, with its steps.',
 * });
 * ```
 */
export function defineApiMethod<S extends StandardSchemaV1, O>(
  definition: ApiMethodDefinition<S, O>,
): ApiMethod<StandardSchemaV1.InferOutput<S>, O, StandardSchemaV1.InferInput<S>> {
  assertApiMethod(definition, []);
  const method: ApiMethod<StandardSchemaV1.InferOutput<S>, O, StandardSchemaV1.InferInput<S>> = {
    input: definition.input,
    permission: definition.permission,
    resource: definition.resource,
    handler: definition.handler,
    ...(definition.description === undefined ? {} : { description: definition.description }),
  };
  return Object.freeze(method);
}

/**
 * Whether `name` may name an API group or method: an identifier of letters and digits starting with a lower-case
 * letter (no dots, so `<group>.<method>` is unambiguous).
 *
 * @example
 * ```ts
 * isApiName('workflows'); // true
 * isApiName('workflows.list'); // false
 * ```
 */
export function isApiName(name: unknown): name is string {
  return typeof name === 'string' && NAME.test(name);
}

/**
 * Defines a group of methods, checked and frozen. The group remembers its name, and mounting it under another key is
 * INVALID_CONFIG; so is a malformed group or method name or a malformed method (with `details.path`).
 *
 * @example
 * ```ts
 * const workflows = defineApiGroup('workflows', { get, list, abort, retry });
 * const module = { id: 'provision', api: { workflows } } satisfies ComputeModule;
 * ```
 */
export function defineApiGroup<const M extends ApiGroup>(name: string, methods: M): M {
  if (!isApiName(name)) throw invalid(`API group name must be an identifier like 'workflows': ${name}`, [name]);
  if (typeof methods !== 'object' || methods === null) {
    throw invalid(`API group '${name}' must be an object of methods`, [name]);
  }
  const group: Record<string, ApiMethod> = {};
  for (const [methodName, method] of Object.entries(methods)) {
    if (!isApiName(methodName)) {
      throw invalid(`API method name must be an identifier like 'list': ${name}.${methodName}`, [name, methodName]);
    }
    assertApiMethod(method, [name, methodName]);
    group[methodName] = Object.isFrozen(method) ? method : Object.freeze({ ...method });
  }
  const frozen = Object.freeze(group) as unknown as M;
  groupNames.set(frozen, name);
  return frozen;
}

/**
 * The name a group was defined with, when it was made by {@link defineApiGroup}.
 *
 * @example
 * ```ts
 * apiGroupName(defineApiGroup('workflows', {})); // 'workflows'
 * ```
 */
export function apiGroupName(group: ApiGroup): string | undefined {
  return groupNames.get(group);
}

/**
 * Checks a set of groups as a dispatcher mounts them and lists every method as `[group, method, definition]`. A key
 * that is not a valid name, a group defined under another name, or a malformed method is INVALID_CONFIG.
 *
 * @example
 * ```ts
 * for (const [group, name, method] of listApiMethods({ workflows })) console.log(`${group}.${name}`, method.permission);
 * ```
 */
export function listApiMethods(groups: Readonly<Record<string, ApiGroup>>): [string, string, ApiMethod][] {
  if (typeof groups !== 'object' || groups === null) throw invalid('groups must be an object of API groups', []);
  const out: [string, string, ApiMethod][] = [];
  for (const [groupName, group] of Object.entries(groups)) {
    if (!isApiName(groupName)) throw invalid(`API group name must be an identifier: ${groupName}`, [groupName]);
    const definedAs = groupNames.get(group);
    if (definedAs !== undefined && definedAs !== groupName) {
      throw invalid(`API group '${definedAs}' is mounted as '${groupName}'`, [groupName]);
    }
    if (typeof group !== 'object' || group === null) throw invalid(`API group '${groupName}' must be an object`, []);
    for (const [methodName, method] of Object.entries(group)) {
      if (!isApiName(methodName)) {
        throw invalid(`API method name must be an identifier: ${groupName}.${methodName}`, [groupName, methodName]);
      }
      assertApiMethod(method, [groupName, methodName]);
      out.push([groupName, methodName, method]);
    }
  }
  return out;
}
