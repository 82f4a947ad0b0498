import { describe, expect, it } from 'vitest';
import { DEADLINE_TICK_MS, DeadlineWatch } from '../src/engine/deadline-watch';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('DeadlineWatch (one timer for every running step deadline)', () => {
  it('expires a run once the wall clock reaches its deadline, and not before', async () => {
    const watch = new DeadlineWatch();
    const expired: string[] = [];
    watch.watch(Date.now() + 5 * DEADLINE_TICK_MS, () => expired.push('late'));
    watch.watch(Date.now(), () => expired.push('due'));
    await sleep(2 * DEADLINE_TICK_MS);
    expect(expired).toEqual(['due']);
    await sleep(6 * DEADLINE_TICK_MS);
    expect(expired).toEqual(['due', 'late']);
    expect(watch.size).toBe(0);
  });

  it('never expires a run that ended first, and forgets it', async () => {
    const watch = new DeadlineWatch();
    let expired = false;
    const unwatch = watch.watch(Date.now() + DEADLINE_TICK_MS, () => {
      expired = true;
    });
    expect(watch.size).toBe(1);
    unwatch();
    expect(watch.size).toBe(0);
    await sleep(3 * DEADLINE_TICK_MS);
    expect(expired).toBe(false);
  });
});
