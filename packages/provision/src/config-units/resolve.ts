import {
  ComputeError,
  type ComputeErrorIssue,
  type ErrorPath,
  evaluateWhen,
  isComputeError,
  type Labels,
  parseWhen,
  validateInput,
} from '@better-compute/core';
import { checkJson, isPlainObject } from '@better-compute/core/checks';
import type { ConfigUnitRegistry, HostSection, HostSectionUnit } from './types';

const BASE: ErrorPath = ['hostConfig'];
const MAX_KNOWN_LISTED = 20;

function unknownUnit(name: string, units: ConfigUnitRegistry): string {
  const known = [...units.keys()].sort();
  const listed = known.slice(0, MAX_KNOWN_LISTED).join(', ');
  const more = known.length > MAX_KNOWN_LISTED ? `, … (${known.length} in all)` : '';
  return `unknown config unit ${JSON.stringify(name)}; known units: ${listed}${more}`;
}

/**
 * Walks a hostConfig: every entry's name, `when` and settings. With `labels`, a unit whose `when` is false is left out
 * of the section (its settings are not checked); without, every unit is checked whatever its `when`.
 */
async function walk(
  units: ConfigUnitRegistry,
  hostConfig: unknown,
  labels: Labels | undefined,
): Promise<{ section: HostSection; issues: ComputeErrorIssue[] }> {
  const issues: ComputeErrorIssue[] = [];
  const section: HostSection = { units: [] };
  const issue = (path: ErrorPath, message: string) => issues.push({ path, message, code: 'INVALID_INPUT' });
  if (!isPlainObject(hostConfig) || !Array.isArray(hostConfig.units)) {
    issue(isPlainObject(hostConfig) ? [...BASE, 'units'] : BASE, 'hostConfig must be an object { units: [...] }');
    return { section, issues };
  }
  const entries: unknown[] = hostConfig.units;
  const names = new Set<string>();
  for (let i = 0; i < entries.length; i += 1) {
    const path: ErrorPath = [...BASE, 'units', i];
    const entry = entries[i];
    if (!isPlainObject(entry)) {
      issue(path, 'a config unit must be an object { name, settings?, when? }');
      continue;
    }
    const { name, when, settings } = entry;
    if (typeof name !== 'string') {
      issue([...path, 'name'], 'a config unit needs a name');
      continue;
    }
    if (names.has(name)) issue([...path, 'name'], `config unit ${JSON.stringify(name)} is listed twice`);
    names.add(name);
    const unit = units.get(name);
    if (!unit) {
      issue([...path, 'name'], unknownUnit(name, units));
      continue;
    }
    if (when !== undefined) {
      let holds: boolean;
      try {
        holds = evaluateWhen(parseWhen(when as string, [...path, 'when']), labels ?? {});
      } catch (error) {
        if (!isComputeError(error)) throw error;
        issue([...path, 'when'], error.message);
        continue;
      }
      if (labels !== undefined && !holds) continue;
    }
    let output: unknown;
    try {
      output = await validateInput(unit.settings, settings ?? {}, [...path, 'settings']);
    } catch (error) {
      if (!isComputeError(error, 'INVALID_INPUT')) throw error;
      issues.push(...(error.details.issues ?? [{ path: [...path, 'settings'], message: error.message }]));
      continue;
    }
    if (!isPlainObject(output) || checkJson(output) !== undefined) {
      throw new ComputeError(
        'INVALID_CONFIG',
        `config unit ${name}: its settings schema must produce a JSON object, and it did not`,
        { details: { path: [...path, 'settings'], unit: name } },
      );
    }
    section.units.push({ name, settings: output as HostSectionUnit['settings'] });
  }
  return { section, issues };
}

function invalid(issues: ComputeErrorIssue[]): ComputeError {
  const first = issues[0] as ComputeErrorIssue;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  return new ComputeError(
    'INVALID_INPUT',
    `hostConfig does not resolve: ${first.path.join('.')}: ${first.message}${more}`,
    {
      details: { path: first.path, issues },
    },
  );
}

/**
 * Resolves a profile's `hostConfig` for a node into its NodeSpec `host` section: `{ units: [{ name, settings }] }` in the
 * order listed, each unit's settings validated against its schema (defaults applied), and units whose `when` is false
 * on `labels` left out. An unknown unit or invalid settings is INVALID_INPUT with `details.path` (e.g.
 * `['hostConfig', 'units', 2, 'settings', 'count']`) and `details.issues` listing every problem. A unit schema whose
 * output is not a JSON object is INVALID_CONFIG.
 *
 * @example
 * ```ts
 * const host = await resolveHostSection(provision.engine.configUnits, profile.hostConfig, { nvswitch: 'true' });
 * // { units: [{ name: 'hugepages', settings: { size: '1G', count: 64 } }, …] }
 * ```
 */
export async function resolveHostSection(
  units: ConfigUnitRegistry,
  hostConfig: unknown,
  labels: Labels,
): Promise<HostSection> {
  const { section, issues } = await walk(units, hostConfig, labels ?? {});
  if (issues.length > 0) throw invalid(issues);
  return section;
}

/**
 * Every problem of a profile's `hostConfig` whatever the node: unknown units, malformed `when`, and invalid settings of
 * every unit, since labels may change before the workflow ends. What `start` reports among its INVALID_INPUT issues.
 *
 * @example
 * ```ts
 * const issues = await hostConfigIssues(engine.configUnits, profile.hostConfig);
 * ```
 */
export async function hostConfigIssues(units: ConfigUnitRegistry, hostConfig: unknown): Promise<ComputeErrorIssue[]> {
  return (await walk(units, hostConfig, undefined)).issues;
}
