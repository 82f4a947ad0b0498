import type { SecretBroker, SqlExecutor } from '@better-compute/core';
import { describe, expect, it, vi } from 'vitest';
import { forgetBootEntrySecrets, forgetSecretsAfterCommit } from '../src/machines/boot-entry-secrets';

// The broker's branches, on an executor that answers the one read: the path through pki and PostgreSQL is
// tests/metal-scenarios.test.ts (an aborted deploy, a ramdisk that never joins).

function executorWith(refs: (string | null)[]) {
  const query = vi.fn(async () => ({ rows: refs.map((ref) => ({ ref })), rowCount: refs.length }));
  return { sql: { query } as unknown as SqlExecutor, query };
}

const broker = (parts: Partial<SecretBroker>): SecretBroker => ({
  put: async () => 'sec_x',
  resolve: async () => 'value',
  ...parts,
});

describe("forgetting a workflow's boot entry secrets", () => {
  it('writes the deletion in the caller transaction when the broker stages deletions, leaving nothing for after', async () => {
    const { sql, query } = executorWith(['sec_a', 'sec_b', null]);
    const write = vi.fn(async () => undefined);
    const stageDelete = vi.fn(() => ({ changes: [], write }));
    const left = await forgetBootEntrySecrets(sql, { secrets: broker({ stageDelete }) }, 'wf_1');
    expect(left).toEqual([]);
    expect(query).toHaveBeenCalledWith(expect.stringContaining("kind = 'site.bootEntry'"), ['wf_1']);
    expect(stageDelete).toHaveBeenCalledWith(['sec_a', 'sec_b']);
    expect(write).toHaveBeenCalledWith(sql);
  });

  it('hands the references back for after the commit when the broker can only delete one by one', async () => {
    const { sql } = executorWith(['sec_a']);
    const remove = vi.fn(async () => undefined);
    const left = await forgetBootEntrySecrets(sql, { secrets: broker({ delete: remove }) }, 'wf_1');
    expect(left).toEqual(['sec_a']);
    expect(remove).not.toHaveBeenCalled();
    const log = { warn: vi.fn() };
    await forgetSecretsAfterCommit({ secrets: broker({ delete: remove }), log } as never, left);
    expect(remove).toHaveBeenCalledWith('sec_a');
  });

  it('reads nothing when the broker can delete nothing, or when there is no broker', async () => {
    const { sql, query } = executorWith(['sec_a']);
    expect(await forgetBootEntrySecrets(sql, { secrets: broker({}) }, 'wf_1')).toEqual([]);
    expect(await forgetBootEntrySecrets(sql, {}, 'wf_1')).toEqual([]);
    expect(query).not.toHaveBeenCalled();
  });

  it('logs a deletion that fails by its reference and goes on with the rest', async () => {
    const remove = vi.fn(async (ref: string) => {
      if (ref === 'sec_a') throw new Error('broker down');
    });
    const log = { warn: vi.fn() };
    await forgetSecretsAfterCommit({ secrets: broker({ delete: remove }), log } as never, ['sec_a', 'sec_b']);
    expect(remove).toHaveBeenCalledTimes(2);
    expect(log.warn).toHaveBeenCalledWith(expect.any(String), { secretRef: 'sec_a', errorName: 'Error' });
  });
});
