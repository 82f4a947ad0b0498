import { describe, expect, it } from 'vitest';
import { InFlightItems } from '../src/work/in-flight-items';
import { WakeSignal } from '../src/work/wake-signal';

describe('WakeSignal', () => {
  it('a wake ends the sleep under way', async () => {
    const signal = new WakeSignal();
    const sleeping = signal.sleep(60_000).then(() => 'woken');
    signal.wake();
    const timeout = new Promise((resolve) => setTimeout(() => resolve('still asleep'), 1_000));
    expect(await Promise.race([sleeping, timeout])).toBe('woken');
  });

  it('a wake with nobody asleep makes the next sleep return at once, and only the next one', async () => {
    const signal = new WakeSignal();
    signal.wake();
    let firstDone = false;
    await signal.sleep(60_000).then(() => {
      firstDone = true;
    });
    expect(firstDone).toBe(true);
    let secondDone = false;
    const second = signal.sleep(20).then(() => {
      secondDone = true;
    });
    await Promise.resolve();
    expect(secondDone).toBe(false);
    await second;
    expect(secondDone).toBe(true);
  });
});

describe('InFlightItems', () => {
  const never = new Promise<void>(() => undefined);

  it('counts routine items and says which shards are busy', () => {
    const running = new InFlightItems();
    running.add({ key: 'a', shard: 1, urgent: false }, never);
    running.add({ key: 'b', shard: 2, urgent: true }, never);
    expect(running.size).toBe(2);
    expect(running.keys()).toEqual(['a', 'b']);
    expect(running.routineCount()).toBe(1);
    expect([0, 1, 2].map((shard) => running.isBusy(shard))).toEqual([false, true, true]);
  });

  it('an item is reported notified when a notification for its shard came while it ran, and not otherwise', () => {
    const running = new InFlightItems();
    running.add({ key: 'a', shard: 1, urgent: false }, never);
    running.add({ key: 'b', shard: 2, urgent: false }, never);
    running.noteNotified(2);
    expect(running.remove('a')).toBe(false);
    expect(running.remove('b')).toBe(true);
    expect(running.size).toBe(0);
    expect(running.isBusy(2)).toBe(false);
    expect(running.remove('gone')).toBe(false);
  });

  it('remembers an urgent notification that came while an item ran, so its claim after it is urgent too', () => {
    const running = new InFlightItems();
    running.add({ key: 'a', shard: 1, urgent: false }, never);
    running.add({ key: 'b', shard: 2, urgent: false }, never);
    running.add({ key: 'c', shard: 3, urgent: false }, never);
    running.noteNotified(1);
    running.noteNotified(2, true);
    expect(['a', 'b', 'c'].map((key) => running.notifiedUrgently(key))).toEqual([false, true, false]);
    expect(running.remove('b')).toBe(true);
    expect(running.notifiedUrgently('b')).toBe(false);
  });

  it('drained waits for every item running, failed ones included, and never rejects', async () => {
    const running = new InFlightItems();
    let finish: () => void = () => undefined;
    const slow = new Promise<void>((resolve) => {
      finish = resolve;
    });
    running.add({ key: 'a', shard: 1, urgent: false }, slow);
    running.add({ key: 'b', shard: 1, urgent: false }, Promise.reject(new Error('boom')));
    let drained = false;
    const waiting = running.drained().then(() => {
      drained = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(drained).toBe(false);
    finish();
    await waiting;
    expect(drained).toBe(true);
  });
});
