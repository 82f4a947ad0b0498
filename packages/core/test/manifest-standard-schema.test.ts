import type { StandardSchemaV1 } from '@standard-schema/spec';
import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { type ComputeError, isComputeError } from '../src/errors';
import { field, isManifest, isStandardSchema, manifest, validateInput, validateInputSync } from '../src/manifest';

async function rejectionOf(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    return error as ComputeError;
  }
  throw new Error('expected a rejection');
}

// A schema written by hand against the spec, as a library we do not know would present itself.
function handWritten(async: boolean): StandardSchemaV1<unknown, { n: number }> {
  const validate = (value: unknown): StandardSchemaV1.Result<{ n: number }> => {
    const n = (value as { n?: unknown } | null)?.n;
    if (typeof n === 'number') return { value: { n: n * 2 } };
    return {
      issues: [
        { message: 'n must be a number', path: [{ key: 'n' }] },
        { message: 'and something deeper', path: ['deep', { key: 0 }, Symbol('tag')] },
      ],
    };
  };
  return {
    '~standard': {
      version: 1,
      vendor: 'hand',
      validate: async ? async (value) => validate(value) : validate,
    },
  };
}

describe('a manifest as a Standard Schema', () => {
  const input = manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) });

  it('has version 1, vendor better-compute and a validate function', () => {
    expect(input['~standard'].version).toBe(1);
    expect(input['~standard'].vendor).toBe('better-compute');
    expect(isStandardSchema(input)).toBe(true);
    expect(isManifest(input)).toBe(true);
  });

  it('validates synchronously, as a generic consumer sees it', () => {
    const consumer = (schema: StandardSchemaV1) => schema['~standard'].validate({ port: 80 });
    expect(consumer(input)).toEqual({ value: { port: 80 } });
  });

  it('is told apart from other Standard Schemas and from look-alikes', () => {
    expect(isManifest(v.object({}))).toBe(false);
    expect(isManifest({ '~standard': { version: 1, vendor: 'better-compute', validate: () => ({ value: 1 }) } })).toBe(
      false,
    );
    expect(isManifest(Object.freeze({ ...input }))).toBe(true);
    expect(isStandardSchema(v.string())).toBe(true);
    expect(
      isStandardSchema(Object.assign(() => 1, { '~standard': { version: 1, vendor: 'fn', validate: () => 1 } })),
    ).toBe(true);
    for (const notOne of [null, undefined, 1, {}, { '~standard': { version: 2, validate() {} } }, { '~standard': 1 }]) {
      expect(isStandardSchema(notOne)).toBe(false);
    }
  });
});

describe('validateInput', () => {
  it('returns a manifest output with defaults', async () => {
    expect(await validateInput(manifest({ port: field.int().default(5) }), {})).toEqual({ port: 5 });
  });

  it('throws INVALID_INPUT with the base path, the first issue path and every issue', async () => {
    const input = manifest({ a: field.string(), b: field.object({ c: field.int() }) });
    const error = await rejectionOf(validateInput(input, { a: 1, b: { c: 'x' } }, ['steps', 2, 'with']));
    expect(isComputeError(error, 'INVALID_INPUT')).toBe(true);
    expect(error.details.path).toEqual(['steps', 2, 'with', 'a']);
    expect(error.details.issues).toEqual([
      { path: ['steps', 2, 'with', 'a'], message: 'expected a string', code: 'INVALID_INPUT' },
      { path: ['steps', 2, 'with', 'b', 'c'], message: 'expected a whole number', code: 'INVALID_INPUT' },
    ]);
    expect(error.message).toBe('invalid input at steps.2.with.a: expected a string (and 1 more)');
  });

  it('accepts a plain valibot schema', async () => {
    const schema = v.object({ nodeId: v.pipe(v.string(), v.minLength(3)), tags: v.optional(v.array(v.string()), []) });
    expect(await validateInput(schema, { nodeId: 'node' })).toEqual({ nodeId: 'node', tags: [] });
    const error = await rejectionOf(validateInput(schema, { nodeId: 'n', tags: ['a', 2] }, ['body']));
    expect(error.details.path).toEqual(['body', 'nodeId']);
    expect(error.details.issues?.map((issue) => issue.path)).toEqual([
      ['body', 'nodeId'],
      ['body', 'tags', 1],
    ]);
  });

  it('accepts an async valibot schema', async () => {
    const schema = v.pipeAsync(
      v.string(),
      v.checkAsync(async (value) => value === 'ok', 'not ok'),
    );
    expect(await validateInput(schema, 'ok')).toBe('ok');
    expect((await rejectionOf(validateInput(schema, 'no', ['x']))).details.path).toEqual(['x']);
  });

  it.each([false, true])(
    'accepts a hand-written Standard Schema (async: %s), path segments of every form',
    async (async) => {
      const schema = handWritten(async);
      expect(await validateInput(schema, { n: 2 })).toEqual({ n: 4 });
      const error = await rejectionOf(validateInput(schema, {}, ['with']));
      expect(error.details.path).toEqual(['with', 'n']);
      expect(error.details.issues?.[1]?.path).toEqual(['with', 'deep', 0, 'Symbol(tag)']);
    },
  );

  it('refuses a value that is not a schema with INVALID_CONFIG', async () => {
    const error = await rejectionOf(validateInput({ parse: () => 1 } as never, {}, ['input']));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect(error.details.path).toEqual(['input']);
  });

  it('turns a schema that throws into INTERNAL without copying its message', async () => {
    const throwing = {
      '~standard': {
        version: 1 as const,
        vendor: 'x',
        validate: () => {
          throw new Error('db password is hunter2');
        },
      },
    };
    const error = await rejectionOf(validateInput(throwing, 1));
    expect(isComputeError(error, 'INTERNAL')).toBe(true);
    expect(error.message).not.toContain('hunter2');
    const rejecting = {
      '~standard': {
        version: 1 as const,
        vendor: 'x',
        validate: async () => {
          throw new Error('boom');
        },
      },
    };
    expect(isComputeError(await rejectionOf(validateInput(rejecting, 1)), 'INTERNAL')).toBe(true);
  });
});

describe('validateInputSync', () => {
  it('validates sync schemas and refuses async ones with INVALID_CONFIG', () => {
    expect(validateInputSync(handWritten(false), { n: 1 })).toEqual({ n: 2 });
    let error: unknown;
    try {
      validateInputSync(handWritten(true), { n: 1 }, ['with']);
    } catch (caught) {
      error = caught;
    }
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as ComputeError).details.path).toEqual(['with']);
  });
});
