import * as v from 'valibot';
import { isPlainObject } from '../checks/checks';
import { ComputeError, type ErrorPath } from '../errors';
import { type FieldShape, isField } from './field';
import type { JsonSchemaIo, JsonSchemaObject } from './json-schema';

function objectMessage(issue: v.StrictObjectIssue): string {
  if (issue.expected === 'never') return 'unknown key';
  if (issue.expected === 'Object') return 'expected an object';
  return 'required';
}

/**
 * Checks a shape where it is defined: every entry a field, and no key that would reach into Object.prototype
 * (`__proto__`, `constructor`, `toString`, …), which object validation could not tell apart from a given key.
 */
export function checkShape(shape: unknown, path: ErrorPath): asserts shape is FieldShape {
  if (!isPlainObject(shape)) {
    throw new ComputeError('INVALID_CONFIG', 'fields must be an object of field.* values', { details: { path } });
  }
  for (const key of Object.keys(shape)) {
    if (key in Object.prototype || key === '__proto__' || key === '') {
      throw new ComputeError('INVALID_CONFIG', `"${key}" cannot be a field name`, {
        details: { path: [...path, key] },
      });
    }
    if (!isField(shape[key])) {
      throw new ComputeError('INVALID_CONFIG', 'expected a field.* value', { details: { path: [...path, key] } });
    }
  }
}

/** The valibot schema of a shape: a plain object (no arrays, class instances) with exactly these keys. */
export function shapeSchema(shape: FieldShape): v.GenericSchema {
  const entries: Record<string, v.GenericSchema> = {};
  for (const [key, entry] of Object.entries(shape)) entries[key] = entry.schema;
  return v.pipe(v.custom(isPlainObject, 'expected an object'), v.strictObject(entries, objectMessage));
}

/** The JSON Schema of a shape: an object with these properties and no others. */
export function shapeJsonSchema(shape: FieldShape, io: JsonSchemaIo): JsonSchemaObject {
  const properties: JsonSchemaObject = {};
  const required: string[] = [];
  for (const [key, entry] of Object.entries(shape)) {
    properties[key] = entry.toJsonSchema(io);
    const mustBePresent = io === 'input' ? entry.presence === 'required' : entry.presence !== 'optional';
    if (mustBePresent) required.push(key);
  }
  const schema: JsonSchemaObject = { type: 'object', properties };
  if (required.length > 0) schema.required = required;
  schema.additionalProperties = false;
  return schema;
}
