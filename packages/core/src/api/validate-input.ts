import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ComputeError, type ComputeErrorIssue, type ErrorPath } from '../errors';

function toPath(path: StandardSchemaV1.Issue['path']): ErrorPath {
  return (path ?? []).map((segment) => {
    const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
    return typeof key === 'number' ? key : String(key);
  });
}

function describePath(path: ErrorPath): string {
  return path.length === 0 ? 'the input' : path.join('.');
}

/**
 * Validates a value against any Standard Schema (valibot, a manifest, zod, arktype) through `~standard.validate`.
 * Failure is INVALID_INPUT with `details.path` of the first issue and `details.issues` listing every issue.
 *
 * @example
 * ```ts
 * const input = await validateInput(v.object({ nodeId: v.string() }), body);
 * ```
 */
export async function validateInput<I>(schema: StandardSchemaV1<unknown, I>, value: unknown): Promise<I> {
  const result = await schema['~standard'].validate(value);
  if (!result.issues) return result.value;
  const issues: ComputeErrorIssue[] = result.issues.map((issue) => ({
    path: toPath(issue.path),
    message: issue.message,
  }));
  const first = issues[0] ?? { path: [], message: 'invalid input' };
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  throw new ComputeError('INVALID_INPUT', `invalid input at ${describePath(first.path)}: ${first.message}${more}`, {
    details: { path: first.path, issues },
  });
}
