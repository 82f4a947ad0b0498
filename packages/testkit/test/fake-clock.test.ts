import { ComputeError } from '@better-compute/core';
import { describe, expect, it } from 'vitest';
import { createFakeClock } from '../src';
import { thrown } from './support/harness';

describe('createFakeClock', () => {
  it('starts at 2026-03-01T00:00:00Z by default', () => {
    expect(createFakeClock().now().toISOString()).toBe('2026-03-01T00:00:00.000Z');
  });

  it('starts at the Date or ISO time it is given', () => {
    expect(createFakeClock('2027-01-02T03:04:05Z').now().toISOString()).toBe('2027-01-02T03:04:05.000Z');
    expect(createFakeClock(new Date(0)).now().getTime()).toBe(0);
  });

  it('refuses a start that is not a time', () => {
    const err = thrown(() => createFakeClock('yesterday'));
    expect(err).toBeInstanceOf(ComputeError);
    expect((err as ComputeError).details.path).toEqual(['start']);
  });

  it('stands still until moved', () => {
    const clock = createFakeClock();
    expect(clock.now().getTime()).toBe(clock.now().getTime());
  });

  it('advances by the milliseconds asked', () => {
    const clock = createFakeClock();
    clock.advance(90_000);
    expect(clock.now().toISOString()).toBe('2026-03-01T00:01:30.000Z');
  });

  it('refuses to advance by a negative or non-finite amount', () => {
    const clock = createFakeClock();
    expect((thrown(() => clock.advance(-1)) as ComputeError).code).toBe('INVALID_INPUT');
    expect((thrown(() => clock.advance(Number.NaN)) as ComputeError).code).toBe('INVALID_INPUT');
    expect(clock.now().toISOString()).toBe('2026-03-01T00:00:00.000Z');
  });

  it('sets to a later time, or the same one', () => {
    const clock = createFakeClock();
    clock.set(new Date('2026-03-02T00:00:00Z'));
    clock.set(new Date('2026-03-02T00:00:00Z'));
    expect(clock.now().toISOString()).toBe('2026-03-02T00:00:00.000Z');
  });

  it('never moves backwards: set to an earlier time throws and leaves it where it was', () => {
    const clock = createFakeClock();
    const err = thrown(() => clock.set(new Date('2026-02-28T23:59:59Z')));
    expect(err).toBeInstanceOf(ComputeError);
    expect((err as ComputeError).message).toContain('never moves backwards');
    expect(clock.now().toISOString()).toBe('2026-03-01T00:00:00.000Z');
  });

  it('hands out copies: changing a Date it returned does not move it', () => {
    const clock = createFakeClock();
    clock.now().setTime(0);
    expect(clock.now().toISOString()).toBe('2026-03-01T00:00:00.000Z');
  });
});
