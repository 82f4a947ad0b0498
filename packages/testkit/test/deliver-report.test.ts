import { ComputeError } from '@better-compute/core';
import { describe, expect, it } from 'vitest';
import { deliverReport } from '../src/http-site/report';
import { createWake } from '../src/http-site/wake';

function refused(code: ConstructorParameters<typeof ComputeError>[0], status: number, details: object = {}) {
  return new ComputeError(code, `refused ${code}`, { details: { ...details, status } as never });
}

function sender(answers: (Error | 'ok')[]) {
  const calls: number[] = [];
  return {
    calls,
    send: async () => {
      calls.push(Date.now());
      const next = answers.shift() ?? 'ok';
      if (next !== 'ok') throw next;
    },
  };
}

const base = { wake: createWake(), label: 'complete c1', keepTrying: () => true };

describe('deliverReport (an agent report sent until the control plane has it)', () => {
  it('sends again after no answer and after a 5xx, backing off 250 then 500 ms, and stops at the first success', async () => {
    const lines: string[] = [];
    const { calls, send } = sender([new Error('socket hang up'), refused('INTERNAL', 500), 'ok']);
    await deliverReport({ ...base, send, reached: ['succeeded'], log: (line) => lines.push(line) });
    expect(calls).toHaveLength(3);
    expect(lines.map((line) => /again in (\d+) ms/.exec(line)?.[1])).toEqual(['250', '500']);
  });

  it('retries an answer that says the call may be retried (a database fault)', async () => {
    const { calls, send } = sender([refused('TIMEOUT', 504, { retryable: true }), 'ok']);
    await deliverReport({ ...base, send, reached: ['succeeded'], log: () => undefined });
    expect(calls).toHaveLength(2);
  });

  it('counts a refusal saying the command already reached the state as delivered (the earlier answer was lost)', async () => {
    const lost = refused('INVALID_STATE', 409, { reason: 'invalid-transition', state: 'succeeded', to: 'succeeded' });
    const { calls, send } = sender([new Error('ECONNRESET'), lost]);
    await expect(deliverReport({ ...base, send, reached: ['succeeded'], log: () => undefined })).resolves.toBe(
      undefined,
    );
    expect(calls).toHaveLength(2);
  });

  it('throws any other refusal at once, without sending again', async () => {
    const expired = refused('INVALID_STATE', 409, { reason: 'invalid-transition', state: 'expired', to: 'succeeded' });
    const { calls, send } = sender([expired, 'ok']);
    await expect(deliverReport({ ...base, send, reached: ['succeeded'], log: () => undefined })).rejects.toBe(expired);
    const notFound = sender([refused('NOT_FOUND', 404), 'ok']);
    await expect(
      deliverReport({ ...base, send: notFound.send, reached: ['succeeded'], log: () => undefined }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect([calls.length, notFound.calls.length]).toEqual([1, 1]);
  });

  it('gives up, without sending again, once it is told to stop trying', async () => {
    let trying = true;
    const wake = createWake();
    const { calls, send } = sender([new Error('ECONNREFUSED'), new Error('ECONNREFUSED'), 'ok']);
    const delivery = deliverReport({
      send,
      reached: [],
      keepTrying: () => trying,
      wake,
      log: () => undefined,
      label: 'join',
    });
    trying = false;
    wake.notify();
    await expect(delivery).rejects.toThrow('ECONNREFUSED');
    expect(calls).toHaveLength(1);
  });
});
