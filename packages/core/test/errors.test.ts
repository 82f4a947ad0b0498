import { describe, expect, it } from 'vitest';
import {
  COMPUTE_ERROR_CODES,
  ComputeError,
  HTTP_STATUS_BY_CODE,
  httpStatusForCode,
  isComputeError,
  toComputeError,
} from '../src/errors';

describe('ComputeError', () => {
  it('keeps code, message, details with path, and the cause', () => {
    const cause = new Error('driver said no');
    const err = new ComputeError('INVALID_CONFIG', 'bad port', {
      details: { path: ['steps', 2, 'with', 'port'] },
      cause,
    });
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.details.path).toEqual(['steps', 2, 'with', 'port']);
    expect(err.cause).toBe(cause);
    expect(err.toJSON()).toEqual({
      code: 'INVALID_CONFIG',
      message: 'bad port',
      details: { path: ['steps', 2, 'with', 'port'] },
    });
  });

  it('is recognised by code, also across copies of the class', () => {
    const foreign = Object.assign(new Error('x'), { name: 'ComputeError', code: 'NOT_FOUND' });
    expect(isComputeError(foreign, 'NOT_FOUND')).toBe(true);
    expect(isComputeError(foreign, 'CONFLICT')).toBe(false);
    expect(isComputeError(Object.assign(new Error('x'), { name: 'ComputeError', code: 'NOPE' }))).toBe(false);
    expect(isComputeError({ code: 'NOT_FOUND' })).toBe(false);
  });
});

describe('toComputeError', () => {
  it('passes a ComputeError through unchanged', () => {
    const err = new ComputeError('CONFLICT', 'taken');
    expect(toComputeError(err)).toBe(err);
  });

  it('turns an unknown throw into INTERNAL without copying its message, keeping it as cause', () => {
    const secret = new Error('password=hunter2');
    const normalized = toComputeError(secret);
    expect(normalized.code).toBe('INTERNAL');
    expect(normalized.message).not.toContain('hunter2');
    expect(normalized.cause).toBe(secret);
    expect(toComputeError('a string', 'DRIVER_ERROR', 'agent failed')).toMatchObject({
      code: 'DRIVER_ERROR',
      message: 'agent failed',
    });
  });
});

describe('HTTP status table', () => {
  it('maps every code, with the statuses DESIGN.md names', () => {
    for (const code of COMPUTE_ERROR_CODES) expect(httpStatusForCode(code)).toBeGreaterThanOrEqual(400);
    expect(Object.keys(HTTP_STATUS_BY_CODE).sort()).toEqual([...COMPUTE_ERROR_CODES].sort());
    expect(HTTP_STATUS_BY_CODE).toMatchObject({
      INVALID_INPUT: 400,
      UNAUTHENTICATED: 401,
      PERMISSION_DENIED: 403,
      NOT_FOUND: 404,
      CONFLICT: 409,
      INVALID_STATE: 409,
      INTERNAL: 500,
    });
  });
});
