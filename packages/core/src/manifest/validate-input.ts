import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ComputeError, type ComputeErrorIssue, type ErrorPath, toComputeError } from '../errors';

/**
 * Whether a value is a Standard Schema v1 (valibot, zod, arktype, a manifest, …): an object or function with a
 * `~standard` property of version 1 and a `validate` function.
 *
 * @example
 * ```ts
 * isStandardSchema(v.object({})); // true
 * isStandardSchema({ parse() {} }); // false
 * ```
 */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const props: unknown = (value as { '~standard'?: unknown })['~standard'];
  if (typeof props !== 'object' || props === null) return false;
  const { version, validate } = props as { version?: unknown; validate?: unknown };
  return version === 1 && typeof validate === 'function';
}

function pathKey(segment: PropertyKey | StandardSchemaV1.PathSegment): string | number {
  const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
  if (typeof key === 'number') return key;
  return typeof key === 'symbol' ? key.toString() : String(key);
}

function formatPath(path: ErrorPath): string {
  return path.length === 0 ? 'the input' : path.join('.');
}

function requireSchema(schema: unknown, basePath: ErrorPath): StandardSchemaV1 {
  if (!isStandardSchema(schema)) {
    throw new ComputeError('INVALID_CONFIG', 'the input schema is not a manifest or a Standard Schema', {
      details: { path: basePath },
    });
  }
  return schema;
}

function settle<T>(result: StandardSchemaV1.Result<T>, basePath: ErrorPath): T {
  if (typeof result !== 'object' || result === null) {
    throw new ComputeError('INTERNAL', 'the input schema returned no result', { details: { path: basePath } });
  }
  if (!result.issues) return result.value;
  const issues: ComputeErrorIssue[] = result.issues.map((issue) => ({
    path: [...basePath, ...(issue.path ?? []).map(pathKey)],
    message: typeof issue.message === 'string' ? issue.message : 'invalid',
    code: 'INVALID_INPUT',
  }));
  const first = issues[0] ?? { path: [...basePath], message: 'invalid' };
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  throw new ComputeError('INVALID_INPUT', `invalid input at ${formatPath(first.path)}: ${first.message}${more}`, {
    details: { path: first.path, issues },
  });
}

function runValidate(schema: StandardSchemaV1, value: unknown) {
  try {
    return schema['~standard'].validate(value);
  } catch (error) {
    throw toComputeError(error, 'INTERNAL', 'the input schema failed while validating');
  }
}

/**
 * Validates a value against a manifest or any Standard Schema (sync or async) and returns its output. Failure is
 * INVALID_INPUT with `details.path` = `basePath` + the first issue's path, and `details.issues` listing every issue
 * with its full path. A schema that throws is INTERNAL, with the throw as `cause`.
 *
 * @example
 * ```ts
 * const input = await validateInput(step.input, profileStep.with, ['steps', 2, 'with']);
 * ```
 */
export async function validateInput<S extends StandardSchemaV1>(
  schema: S,
  value: unknown,
  basePath: ErrorPath = [],
): Promise<StandardSchemaV1.InferOutput<S>> {
  const checked = requireSchema(schema, basePath);
  let result: StandardSchemaV1.Result<unknown>;
  try {
    result = await runValidate(checked, value);
  } catch (error) {
    throw toComputeError(error, 'INTERNAL', 'the input schema failed while validating');
  }
  return settle(result, basePath) as StandardSchemaV1.InferOutput<S>;
}

/**
 * {@link validateInput} for schemas that validate synchronously, as manifests and most valibot and zod schemas do. A
 * schema that answers with a promise is INVALID_CONFIG: use `validateInput` for it.
 *
 * @example
 * ```ts
 * const settings = validateInputSync(unit.settings, node.host.units[0].settings, ['host', 'units', 0, 'settings']);
 * ```
 */
export function validateInputSync<S extends StandardSchemaV1>(
  schema: S,
  value: unknown,
  basePath: ErrorPath = [],
): StandardSchemaV1.InferOutput<S> {
  const result = runValidate(requireSchema(schema, basePath), value);
  if (result instanceof Promise) {
    // Don't leave the rejection unhandled: the caller gets the error below instead.
    result.catch(() => undefined);
    throw new ComputeError('INVALID_CONFIG', 'the input schema validates asynchronously; use validateInput', {
      details: { path: basePath },
    });
  }
  return settle(result, basePath) as StandardSchemaV1.InferOutput<S>;
}
