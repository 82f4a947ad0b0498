import type { ApiGroup } from '../api/types';
import type { CommandKindDefinition } from '../commands/types';
import { ComputeError } from '../errors';
import { assertModuleId } from './define-plugin';
import type { ComputeModule, Extension, Reconciler } from './module';

/** Where a registered part came from, for error messages: `modules[2] 'metal'` or `plugins[0] 'acme'`. */
interface Owner {
  moduleId: string;
  label: string;
}

/** Every module and plugin of one `betterCompute`, validated, with their parts indexed. */
export interface ModuleRegistry {
  /** Modules then plugins, dependencies first. */
  readonly modules: readonly ComputeModule[];
  readonly reconcilers: ReadonlyMap<string, Reconciler>;
  /** Every module's `wakeOnAgentSession`: the kinds queued, keyed by the node id, when a node's agent connects. */
  readonly agentSessionWakes: readonly string[];
  readonly apiGroups: Readonly<Record<string, ApiGroup>>;
  readonly commandKinds: readonly { moduleId: string; definition: CommandKindDefinition }[];
  /** Extensions by `extension` kind, then id. */
  readonly extensions: ReadonlyMap<string, ReadonlyMap<string, { moduleId: string; extension: Extension }>>;
  get(id: string): ComputeModule | undefined;
}

function duplicate(what: string, first: Owner, second: Owner, path: (string | number)[]): ComputeError {
  return new ComputeError('INVALID_CONFIG', `${what} is registered twice: by ${first.label} and by ${second.label}`, {
    details: { path, first: first.moduleId, second: second.moduleId },
  });
}

function orderByDependencies(entries: { module: ComputeModule; owner: Owner; path: (string | number)[] }[]) {
  const byId = new Map(entries.map((entry) => [entry.module.id, entry]));
  const ordered: typeof entries = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (entry: (typeof entries)[number], chain: string[]) => {
    const seen = state.get(entry.module.id);
    if (seen === 'done') return;
    if (seen === 'visiting') {
      throw new ComputeError('INVALID_CONFIG', `modules depend on each other in a cycle: ${chain.join(' → ')}`, {
        details: { path: [...entry.path, 'dependsOn'] },
      });
    }
    state.set(entry.module.id, 'visiting');
    (entry.module.dependsOn ?? []).forEach((dep, i) => {
      const target = byId.get(dep);
      if (!target) {
        throw new ComputeError('INVALID_CONFIG', `${entry.owner.label} depends on '${dep}', which is not registered`, {
          details: { path: [...entry.path, 'dependsOn', i] },
        });
      }
      visit(target, [...chain, dep]);
    });
    state.set(entry.module.id, 'done');
    ordered.push(entry);
  };
  for (const entry of entries) visit(entry, [entry.module.id]);
  return ordered;
}

/**
 * Validates and indexes modules and plugins: a duplicate module or plugin id, extension, reconciler kind, API group or
 * command kind is `INVALID_CONFIG` naming both owners; a missing or cyclic `dependsOn` is refused too.
 *
 * @example
 * ```ts
 * const registry = createModuleRegistry({ modules: [metal()], plugins: [acme] });
 * registry.reconcilers.get('workflow');
 * ```
 */
export function createModuleRegistry(input: {
  modules?: readonly ComputeModule[];
  plugins?: readonly ComputeModule[];
}): ModuleRegistry {
  const entries: { module: ComputeModule; owner: Owner; path: (string | number)[] }[] = [];
  const ids = new Map<string, Owner>();
  for (const [listName, list] of [
    ['modules', input.modules ?? []],
    ['plugins', input.plugins ?? []],
  ] as const) {
    if (!Array.isArray(list)) {
      throw new ComputeError('INVALID_CONFIG', `${listName} must be an array`, { details: { path: [listName] } });
    }
    list.forEach((module: ComputeModule, index: number) => {
      const path = [listName, index];
      if (typeof module !== 'object' || module === null) {
        throw new ComputeError('INVALID_CONFIG', `${listName}[${index}] must be a module object`, {
          details: { path },
        });
      }
      assertModuleId(module.id, [...path, 'id']);
      const owner = { moduleId: module.id, label: `${listName}[${index}] '${module.id}'` };
      const previous = ids.get(module.id);
      if (previous) throw duplicate(`module '${module.id}'`, previous, owner, [...path, 'id']);
      ids.set(module.id, owner);
      entries.push({ module, owner, path });
    });
  }

  const ordered = orderByDependencies(entries);
  const reconcilers = new Map<string, Reconciler>();
  const reconcilerOwners = new Map<string, Owner>();
  const apiGroups: Record<string, ApiGroup> = {};
  const apiOwners = new Map<string, Owner>();
  const commandKinds: { moduleId: string; definition: CommandKindDefinition }[] = [];
  const agentSessionWakes: string[] = [];
  const extensions = new Map<string, Map<string, { moduleId: string; extension: Extension }>>();
  const extensionOwners = new Map<string, Owner>();

  for (const { module, owner, path } of ordered) {
    for (const [kind, reconciler] of Object.entries(module.reconcilers ?? {})) {
      if (typeof reconciler !== 'function') {
        throw new ComputeError('INVALID_CONFIG', `reconciler '${kind}' must be a function`, {
          details: { path: [...path, 'reconcilers', kind] },
        });
      }
      checkPreload(reconciler, kind, [...path, 'reconcilers', kind, 'preload']);
      checkPark(reconciler, kind, [...path, 'reconcilers', kind, 'park']);
      const previous = reconcilerOwners.get(kind);
      if (previous) throw duplicate(`reconciler '${kind}'`, previous, owner, [...path, 'reconcilers', kind]);
      reconcilerOwners.set(kind, owner);
      reconcilers.set(kind, reconciler);
    }
    agentSessionWakes.push(...checkSessionWakes(module, [...path, 'wakeOnAgentSession']));
    for (const [group, methods] of Object.entries(module.api ?? {})) {
      const previous = apiOwners.get(group);
      if (previous) throw duplicate(`API group '${group}'`, previous, owner, [...path, 'api', group]);
      apiOwners.set(group, owner);
      apiGroups[group] = methods;
    }
    for (const definition of module.commandKinds ?? []) commandKinds.push({ moduleId: module.id, definition });
    (module.extensions ?? []).forEach((extension, i) => {
      const key = `${extension.extension}:${extension.id}`;
      const previous = extensionOwners.get(key);
      if (previous) {
        throw duplicate(`${extension.extension} '${extension.id}'`, previous, owner, [...path, 'extensions', i]);
      }
      extensionOwners.set(key, owner);
      let byId = extensions.get(extension.extension);
      if (!byId) {
        byId = new Map();
        extensions.set(extension.extension, byId);
      }
      byId.set(extension.id, { moduleId: module.id, extension });
    });
  }

  const modules = ordered.map((entry) => entry.module);
  const byId = new Map(modules.map((module) => [module.id, module]));
  return {
    modules,
    reconcilers,
    agentSessionWakes,
    apiGroups,
    commandKinds,
    extensions,
    get: (id) => byId.get(id),
  };
}

/**
 * A reconciler's SQL hook, if any (`preload`: `{ sql(key, now) }`; `park`: `{ sql(on, now) }`), is an object whose `sql`
 * returns a non-empty SQL expression for sample arguments.
 */
function checkSqlHook(hook: unknown, sampleArgs: readonly string[], refusal: string, path: (string | number)[]): void {
  if (hook === undefined) return;
  const build = typeof hook === 'object' && hook !== null ? (hook as { sql?: unknown }).sql : undefined;
  let sample: unknown;
  try {
    sample = typeof build === 'function' ? build(...sampleArgs) : undefined;
  } catch {
    sample = undefined;
  }
  if (typeof sample !== 'string' || sample.trim() === '') {
    throw new ComputeError('INVALID_CONFIG', refusal, { details: { path } });
  }
}

function checkPreload(reconciler: Reconciler, kind: string, path: (string | number)[]): void {
  const refusal = `reconciler '${kind}' has a preload that is not { sql(key, now) } returning an SQL expression`;
  checkSqlHook(reconciler.preload, ['w.key', '$1::timestamptz'], refusal, path);
}

function checkPark(reconciler: Reconciler, kind: string, path: (string | number)[]): void {
  const refusal = `reconciler '${kind}' has a park that is not { sql(on, now) } returning an SQL expression`;
  checkSqlHook(reconciler.park, ['w.park_on', '$1::timestamptz'], refusal, path);
}

/** `wakeOnAgentSession`, if given, is an array of the module's own reconciler kinds (an item of any other would fail). */
function checkSessionWakes(module: ComputeModule, path: (string | number)[]): readonly string[] {
  const kinds: unknown = module.wakeOnAgentSession;
  if (kinds === undefined) return [];
  if (!Array.isArray(kinds)) {
    throw new ComputeError('INVALID_CONFIG', 'wakeOnAgentSession must be an array of work kinds', {
      details: { path },
    });
  }
  kinds.forEach((kind, i) => {
    if (typeof kind !== 'string' || !Object.hasOwn(module.reconcilers ?? {}, kind)) {
      throw new ComputeError(
        'INVALID_CONFIG',
        `wakeOnAgentSession names '${String(kind)}', which is not a reconciler of module '${module.id}'`,
        { details: { path: [...path, i] } },
      );
    }
  });
  return [...new Set(kinds as string[])];
}
