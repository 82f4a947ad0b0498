import type {
  ErrorPath,
  FieldShape,
  JsonSchemaObject,
  JsonSchemaOptions,
  Manifest,
  ManifestInput,
  ManifestOutput,
} from '@better-compute/core';
import { isPlainObject } from '@better-compute/core/checks';
import type { StandardJSONSchemaV1, StandardSchemaV1 } from '@standard-schema/spec';

/** One problem a settings check found, with its path inside the settings. */
export interface SettingsIssue {
  path: ErrorPath;
  message: string;
}

/** What a settings check returns: the (possibly normalised) settings, or what is wrong with them (at least one issue). */
export type SettingsCheck<O> = { value: O } | { issues: SettingsIssue[] };

/**
 * The settings when no issue was found, else the issues.
 *
 * @example
 * ```ts
 * return settled(issues, { ...settings, values });
 * ```
 */
export function settled<O>(issues: readonly SettingsIssue[], value: O): SettingsCheck<O> {
  return issues.length > 0 ? { issues: [...issues] } : { value };
}

/**
 * A config unit's settings schema made of a manifest plus checks a manifest cannot say (maps, cross-field rules): a
 * Standard Schema and Standard JSON Schema, like a manifest.
 */
export interface SettingsSchema<I = unknown, O = unknown> {
  readonly '~standard': StandardSchemaV1.Props<I, O> & StandardJSONSchemaV1.Props<I, O>;
  /** The JSON Schema of the settings, with the map fields described as maps. */
  toJsonSchema(options?: JsonSchemaOptions): JsonSchemaObject;
}

/**
 * Extends a manifest with a check run on its output: `check` returns the settings (it may normalise them, e.g. numbers
 * to strings) or issues with paths inside the settings. `properties` replaces the JSON Schema of fields the manifest
 * can only call `json` (maps), keeping their description.
 *
 * @example
 * ```ts
 * const sysctl = refineSettings(manifest({ values: field.json() }), (s) => checkMap(s.values), { values: mapSchema });
 * ```
 */
export function refineSettings<S extends FieldShape, O>(
  base: Manifest<S>,
  check: (value: ManifestOutput<Manifest<S>>) => SettingsCheck<O>,
  properties: { [key: string]: JsonSchemaObject } = {},
): SettingsSchema<ManifestInput<Manifest<S>>, O> {
  const patch = (schema: JsonSchemaObject): JsonSchemaObject => {
    const current = (schema.properties ?? {}) as { [key: string]: JsonSchemaObject };
    const next: { [key: string]: JsonSchemaObject } = { ...current };
    for (const [key, replacement] of Object.entries(properties)) {
      const description = current[key]?.description;
      next[key] = description === undefined ? { ...replacement } : { ...replacement, description };
    }
    return { ...schema, properties: next };
  };
  const validate = (value: unknown): StandardSchemaV1.Result<O> => {
    // A manifest validates synchronously.
    const result = base['~standard'].validate(value) as StandardSchemaV1.Result<ManifestOutput<Manifest<S>>>;
    if (result.issues) return { issues: result.issues };
    const checked = check(result.value);
    if ('issues' in checked) {
      return { issues: checked.issues.map((issue) => ({ message: issue.message, path: [...issue.path] })) };
    }
    return { value: checked.value };
  };
  const toJsonSchema = (options?: JsonSchemaOptions) => patch(base.toJsonSchema(options));
  const jsonSchema = (io: 'input' | 'output') => (options: StandardJSONSchemaV1.Options) =>
    patch(base.toJsonSchema({ target: options.target as JsonSchemaOptions['target'], io }));
  return Object.freeze({
    '~standard': Object.freeze({
      version: 1 as const,
      vendor: 'better-compute',
      validate,
      jsonSchema: Object.freeze({ input: jsonSchema('input'), output: jsonSchema('output') }),
    }),
    toJsonSchema,
  });
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f]/;

/** How {@link checkStringMap} checks a map of key → string. */
export interface StringMapRules {
  /** The key pattern and how to describe it. */
  key: RegExp;
  keyShape: string;
  maxKeyLength?: number;
  /** The longest value, in characters (default 4096). */
  maxValueLength?: number;
  /** A value pattern and how to describe it; by default any text without control characters. */
  value?: RegExp;
  valueShape?: string;
  /** Numbers (and booleans) are written as strings (`10` → `'10'`); otherwise only strings pass. */
  coerce?: boolean;
  /** The most entries (default 1024). */
  maxEntries?: number;
}

/**
 * Checks a map of key → string at `path`, pushing issues, and returns it with every value a string.
 *
 * @example
 * ```ts
 * const values = checkStringMap(settings.values, ['values'], { key: SYSCTL_KEY, keyShape: 'like vm.swappiness' }, issues);
 * ```
 */
export function checkStringMap(
  map: unknown,
  path: ErrorPath,
  rules: StringMapRules,
  issues: SettingsIssue[],
): { [key: string]: string } {
  const out: { [key: string]: string } = {};
  if (!isPlainObject(map)) {
    issues.push({ path, message: 'expected an object of key → string' });
    return out;
  }
  const entries = Object.entries(map);
  const maxEntries = rules.maxEntries ?? 1024;
  if (entries.length > maxEntries) {
    issues.push({ path, message: `must have at most ${maxEntries} entries` });
    return out;
  }
  const maxValue = rules.maxValueLength ?? 4096;
  for (const [key, raw] of entries) {
    const at = [...path, key];
    if (key.length > (rules.maxKeyLength ?? 256) || !rules.key.test(key)) {
      issues.push({ path: at, message: `${JSON.stringify(key)} is not a valid key (${rules.keyShape})` });
      continue;
    }
    let value: string;
    if (typeof raw === 'string') value = raw;
    else if (rules.coerce && ((typeof raw === 'number' && Number.isFinite(raw)) || typeof raw === 'boolean')) {
      value = String(raw);
    } else {
      issues.push({ path: at, message: rules.coerce ? 'expected a string or a number' : 'expected a string' });
      continue;
    }
    if (value.length > maxValue) {
      issues.push({ path: at, message: `must be at most ${maxValue} characters` });
    } else if (CONTROL.test(value)) {
      issues.push({ path: at, message: 'must not contain line breaks or control characters' });
    } else if (rules.value && !rules.value.test(value)) {
      issues.push({ path: at, message: `must be ${rules.valueShape ?? `like ${rules.value.source}`}` });
    } else {
      out[key] = value;
    }
  }
  return out;
}

/**
 * The JSON Schema of a map of key → string.
 *
 * @example
 * ```ts
 * stringMapJsonSchema(/^[a-z.]+$/); // { type: 'object', propertyNames: { pattern: '^[a-z.]+$' }, additionalProperties: { type: 'string' } }
 * ```
 */
export function stringMapJsonSchema(key: RegExp, coerce = false): JsonSchemaObject {
  const value: JsonSchemaObject = coerce ? { type: ['string', 'number', 'boolean'] } : { type: 'string' };
  return { type: 'object', propertyNames: { pattern: key.source }, additionalProperties: value };
}
