import { describe, expect, it } from 'vitest';
import type { ComputeModule, Reconciler } from '../src/kernel';
import { createModuleRegistry, definePlugin } from '../src/kernel';

function thrown(fn: () => unknown): { code?: string; message?: string; details?: Record<string, unknown> } {
  try {
    fn();
  } catch (err) {
    return err as { code: string; message: string; details: Record<string, unknown> };
  }
  throw new Error('expected a throw');
}

const noop = async () => undefined;

describe('definePlugin', () => {
  it('returns the plugin frozen with kind plugin and keeps its literal id', () => {
    const plugin = definePlugin({ id: 'acme-autoinstall', extensions: [{ extension: 'step', id: 'acme.render' }] });
    expect(plugin.kind).toBe('plugin');
    expect(Object.isFrozen(plugin)).toBe(true);
    const id: 'acme-autoinstall' = plugin.id;
    expect(id).toBe('acme-autoinstall');
  });

  it('refuses an id that is not kebab-case with the path of the id', () => {
    expect(thrown(() => definePlugin({ id: 'Acme_Plugin' }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['id'] },
    });
  });

  it('refuses a malformed extension with its index', () => {
    const bad = [{ extension: 'step', id: 'ok.one' }, { id: 'missing.kind' }] as never;
    expect(thrown(() => definePlugin({ id: 'acme', extensions: bad }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['extensions', 1] },
    });
  });
});

describe('createModuleRegistry', () => {
  it('refuses a module registered twice, naming both places', () => {
    const err = thrown(() => createModuleRegistry({ modules: [{ id: 'metal' }, { id: 'other' }, { id: 'metal' }] }));
    expect(err).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['modules', 2, 'id'] } });
    expect(err.message).toContain("modules[0] 'metal'");
    expect(err.message).toContain("modules[2] 'metal'");
  });

  it('refuses a plugin whose id is a module id', () => {
    const err = thrown(() =>
      createModuleRegistry({ modules: [{ id: 'acme' }], plugins: [definePlugin({ id: 'acme' })] }),
    );
    expect(err).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['plugins', 0, 'id'] } });
  });

  it('refuses an extension registered twice, naming both owners', () => {
    const step = { extension: 'step', id: 'acme.render' };
    const err = thrown(() =>
      createModuleRegistry({
        modules: [{ id: 'provision', extensions: [step] }],
        plugins: [definePlugin({ id: 'acme', extensions: [step] })],
      }),
    );
    expect(err).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['plugins', 0, 'extensions', 0] } });
    expect(err.message).toContain("modules[0] 'provision'");
    expect(err.message).toContain("plugins[0] 'acme'");
  });

  it('allows the same extension id under two extension kinds', () => {
    const registry = createModuleRegistry({
      modules: [
        {
          id: 'a',
          extensions: [
            { extension: 'step', id: 'x.y' },
            { extension: 'profile', id: 'x.y' },
          ],
        },
      ],
    });
    expect(registry.extensions.get('step')?.get('x.y')?.moduleId).toBe('a');
    expect(registry.extensions.get('profile')?.get('x.y')?.moduleId).toBe('a');
  });

  it('refuses a reconciler kind and an API group registered twice', () => {
    expect(
      thrown(() =>
        createModuleRegistry({
          modules: [
            { id: 'a', reconcilers: { sweep: noop } },
            { id: 'b', reconcilers: { sweep: noop } },
          ],
        }),
      ),
    ).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['modules', 1, 'reconcilers', 'sweep'] } });
    expect(
      thrown(() =>
        createModuleRegistry({
          modules: [
            { id: 'a', api: { nodes: {} } },
            { id: 'b', api: { nodes: {} } },
          ],
        }),
      ),
    ).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['modules', 1, 'api', 'nodes'] } });
  });

  it('refuses a reconciler preload that is not { sql(key, now) } returning an SQL expression, and keeps a good one', () => {
    const bad: unknown[] = [
      'SELECT 1',
      { sql: 'SELECT 1' },
      { sql: () => 42 },
      { sql: () => '  ' },
      {
        sql: () => {
          throw new Error('no');
        },
      },
    ];
    for (const preload of bad) {
      const sweep = Object.assign(async () => undefined, { preload }) as unknown as Reconciler;
      expect(thrown(() => createModuleRegistry({ modules: [{ id: 'a', reconcilers: { sweep } }] }))).toMatchObject({
        code: 'INVALID_CONFIG',
        details: { path: ['modules', 0, 'reconcilers', 'sweep', 'preload'] },
      });
    }
    const good = Object.assign(async () => undefined, { preload: { sql: (key: string) => `(SELECT ${key})` } });
    const registry = createModuleRegistry({ modules: [{ id: 'a', reconcilers: { sweep: good } }] });
    expect(registry.reconcilers.get('sweep')?.preload?.sql('k', 'now()')).toBe('(SELECT k)');
  });

  it('refuses a reconciler park that is not { sql(on, now) } returning an SQL expression, and keeps a good one', () => {
    for (const park of ['EXISTS (SELECT 1)', { sql: () => null }, { sql: () => '' }]) {
      const sweep = Object.assign(async () => undefined, { park }) as unknown as Reconciler;
      expect(thrown(() => createModuleRegistry({ modules: [{ id: 'a', reconcilers: { sweep } }] }))).toMatchObject({
        code: 'INVALID_CONFIG',
        details: { path: ['modules', 0, 'reconcilers', 'sweep', 'park'] },
      });
    }
    const sql = (on: string, now: string) => `(${on}->>'until')::timestamptz > ${now}`;
    const good = Object.assign(async () => undefined, { park: { sql } });
    const registry = createModuleRegistry({ modules: [{ id: 'a', reconcilers: { sweep: good } }] });
    expect(registry.reconcilers.get('sweep')?.park?.sql('o', 'n')).toBe("(o->>'until')::timestamptz > n");
  });

  it("collects wakeOnAgentSession, and refuses a kind that is not one of the module's own reconcilers", () => {
    const sweep: Reconciler = async () => undefined;
    const registry = createModuleRegistry({
      modules: [{ id: 'a', reconcilers: { 'a.wait': sweep, 'a.sweep': sweep }, wakeOnAgentSession: ['a.wait'] }],
    });
    expect(registry.agentSessionWakes).toEqual(['a.wait']);
    expect(createModuleRegistry({ modules: [{ id: 'a' }] }).agentSessionWakes).toEqual([]);
    const foreign = thrown(() =>
      createModuleRegistry({
        modules: [
          { id: 'a', reconcilers: { 'a.wait': sweep } },
          { id: 'b', wakeOnAgentSession: ['a.wait'] },
        ],
      }),
    );
    expect(foreign).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 1, 'wakeOnAgentSession', 0] },
    });
    expect(
      thrown(() => createModuleRegistry({ modules: [{ id: 'a', wakeOnAgentSession: 'a.wait' as never }] })),
    ).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['modules', 0, 'wakeOnAgentSession'] } });
  });

  it('orders modules so dependencies come first', () => {
    const modules: ComputeModule[] = [
      { id: 'metal', dependsOn: ['provision'] },
      { id: 'provision', dependsOn: ['pki'] },
      { id: 'pki' },
    ];
    expect(createModuleRegistry({ modules }).modules.map((m) => m.id)).toEqual(['pki', 'provision', 'metal']);
  });

  it('refuses a missing dependency and a cycle', () => {
    expect(thrown(() => createModuleRegistry({ modules: [{ id: 'metal', dependsOn: ['provision'] }] }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 0, 'dependsOn', 0] },
    });
    const cycle = thrown(() =>
      createModuleRegistry({
        modules: [
          { id: 'a', dependsOn: ['b'] },
          { id: 'b', dependsOn: ['a'] },
        ],
      }),
    );
    expect(cycle).toMatchObject({ code: 'INVALID_CONFIG' });
    expect(cycle.message).toContain('cycle');
  });

  it('refuses a module list that is not an array, and a module that is not an object', () => {
    expect(thrown(() => createModuleRegistry({ modules: 'metal' as never }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules'] },
    });
    expect(thrown(() => createModuleRegistry({ modules: [null as never] }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 0] },
    });
  });
});
