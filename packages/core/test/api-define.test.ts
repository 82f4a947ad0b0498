import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { apiGroupName, defineApiGroup, defineApiMethod, listApiMethods } from '../src/api';

const ping = defineApiMethod({
  input: v.object({ tenantId: v.string() }),
  permission: 'compute:ping:read',
  resource: async (input) => ({ type: 'compute-tenant', tenantId: input.tenantId }),
  handler: async () => ({ pong: true }),
  description: 'Answers pong.',
});

function configError(fn: () => unknown) {
  try {
    fn();
  } catch (error) {
    return error as { code: string; details: { path?: unknown } };
  }
  throw new Error('expected INVALID_CONFIG');
}

describe('defineApiMethod', () => {
  it('returns a frozen method with its parts', () => {
    expect(Object.isFrozen(ping)).toBe(true);
    expect(ping.permission).toBe('compute:ping:read');
    expect(ping.description).toBe('Answers pong.');
  });

  it('refuses a malformed permission, a wildcard permission and a missing schema with their paths', () => {
    const base = { ...ping };
    const cases: [Record<string, unknown>, string[]][] = [
      [{ permission: 'compute:ping' }, ['permission']],
      [{ permission: 'compute:ping:*' }, ['permission']],
      [{ permission: 'ping:read' }, ['permission']],
      [{ input: { parse: () => 1 } }, ['input']],
      [{ handler: 'nope' }, ['handler']],
      [{ resource: undefined }, ['resource']],
      [{ description: 3 }, ['description']],
    ];
    for (const [patch, path] of cases) {
      const error = configError(() => defineApiMethod({ ...base, ...patch } as typeof base));
      expect({ code: error.code, path: error.details.path }).toEqual({ code: 'INVALID_CONFIG', path });
    }
  });
});

describe('defineApiGroup', () => {
  it('freezes the group and remembers its name', () => {
    const group = defineApiGroup('health', { ping });
    expect(Object.isFrozen(group)).toBe(true);
    expect(apiGroupName(group)).toBe('health');
    expect(group.ping).toBe(ping);
  });

  it('refuses group and method names that are not dot-free identifiers', () => {
    expect(configError(() => defineApiGroup('work.flows', { ping }))).toMatchObject({ code: 'INVALID_CONFIG' });
    expect(configError(() => defineApiGroup('health', { 'pi.ng': ping }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['health', 'pi.ng'] },
    });
  });

  it('refuses a malformed method inside a group with the group and method in the path', () => {
    const bad = { ...ping, permission: 'nope' } as unknown as typeof ping;
    expect(configError(() => defineApiGroup('health', { ping: bad }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['health', 'ping', 'permission'] },
    });
  });

  it('refuses a group mounted under another name than it was defined with', () => {
    const health = defineApiGroup('health', { ping });
    expect(configError(() => listApiMethods({ health, status: health }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['status'] },
    });
  });
});
