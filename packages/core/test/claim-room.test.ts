import { describe, expect, it } from 'vitest';
import { claimRoom, urgentReserve } from '../src/work/claim-room';

describe('claimRoom', () => {
  it('keeps a quarter of the slots, rounded down, for urgent items', () => {
    expect([1, 3, 4, 8, 16].map(urgentReserve)).toEqual([0, 0, 1, 2, 4]);
  });

  it('an idle worker claims every slot, routine items up to the slots outside the reserve', () => {
    expect(claimRoom({ concurrency: 16, inFlight: 0, routineInFlight: 0, urgentWake: false })).toEqual({
      free: 16,
      routineRoom: 12,
      worthClaiming: true,
    });
  });

  it('a busy worker waits until half its slots are free before claiming routine work', () => {
    const busy = claimRoom({ concurrency: 16, inFlight: 9, routineInFlight: 9, urgentWake: false });
    expect(busy).toEqual({ free: 7, routineRoom: 3, worthClaiming: false });
    const halfFree = claimRoom({ concurrency: 16, inFlight: 8, routineInFlight: 8, urgentWake: false });
    expect(halfFree).toEqual({ free: 8, routineRoom: 4, worthClaiming: true });
  });

  it('an urgent wake is claimed as soon as one slot is free, even with no room left for routine items', () => {
    const full = { concurrency: 16, inFlight: 15, routineInFlight: 12, urgentWake: true };
    expect(claimRoom(full)).toEqual({ free: 1, routineRoom: 0, worthClaiming: true });
    expect(claimRoom({ ...full, urgentWake: false }).worthClaiming).toBe(false);
    expect(claimRoom({ ...full, inFlight: 16 }).worthClaiming).toBe(false);
  });

  it('half the slots free but all routine room taken is not worth a claim without an urgent wake', () => {
    // 12 routine items hold every slot outside the reserve; 8 free would otherwise make a batch.
    const room = claimRoom({ concurrency: 24, inFlight: 12, routineInFlight: 18, urgentWake: false });
    expect(room).toEqual({ free: 12, routineRoom: 0, worthClaiming: false });
  });
});
