import * as v from 'valibot';
import { MAX_PROFILE_VERSION } from '../define/types';

/** An id or name in an API input: a non-empty string of at most 512 characters. */
export function textSchema(field: string) {
  return v.pipe(
    v.string(`${field} must be a string`),
    v.minLength(1, `${field} must not be empty`),
    v.maxLength(512, `${field} must be at most 512 characters`),
  );
}

/** A profile version: a whole number from 1 to 2^31 - 1 (the column is an integer). */
export const versionSchema = v.pipe(
  v.number('version must be a number'),
  v.integer('version must be a whole number'),
  v.minValue(1, 'version must be at least 1'),
  v.maxValue(MAX_PROFILE_VERSION, `version must be at most ${MAX_PROFILE_VERSION}`),
);

/** A Date, or null, as the ISO 8601 string the HTTP API sends. */
export function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
