import { describe, expect, it } from 'vitest';
import {
  ACCEPTED_IN,
  decideRequest,
  decideWorkflowEnd,
  type LifecycleSnapshot,
  type LifecycleVerb,
  NODE_STATES,
  type NodeState,
} from '../src';

const VERBS_ON_NODES = Object.keys(ACCEPTED_IN) as Exclude<LifecycleVerb, 'enroll' | 'adopt'>[];

/** Runs a node through its workflows' ends, all succeeding, until it rests. */
function runToRest(start: LifecycleSnapshot): NodeState[] {
  const states: NodeState[] = [start.state];
  let node: LifecycleSnapshot | undefined = start;
  for (let i = 0; i < 10 && node; i += 1) {
    const move = decideWorkflowEnd(node, 'succeeded');
    if (!move) break;
    states.push(move.to);
    node = move.startsWorkflow ? { state: move.to, enrolling: move.enrolling } : undefined;
  }
  return states;
}

describe('the machine lifecycle', () => {
  it('enrolls a new machine and goes on through inspecting and commissioning to available', () => {
    const move = decideRequest(undefined, 'enroll');
    expect(move).toMatchObject({ from: undefined, to: 'enrolling', startsWorkflow: true, enrolling: true });
    expect(runToRest({ state: 'enrolling', enrolling: true })).toEqual([
      'enrolling',
      'inspecting',
      'commissioning',
      'available',
    ]);
  });

  it('adopts a machine straight to deployed, and refuses to enroll or adopt one twice', () => {
    expect(decideRequest(undefined, 'adopt')).toMatchObject({ to: 'adopting', startsWorkflow: true });
    expect(runToRest({ state: 'adopting' })).toEqual(['adopting', 'deployed']);
    for (const verb of ['enroll', 'adopt'] as const) {
      expect(() => decideRequest({ state: 'available' }, verb)).toThrowError(
        expect.objectContaining({ code: 'INVALID_STATE', message: `cannot ${verb} a machine in state 'available'` }),
      );
    }
  });

  it('runs an inspect or a commission of an available machine on its own and brings it back to available', () => {
    expect(runToRest({ state: decideRequest({ state: 'available' }, 'inspect').to })).toEqual([
      'inspecting',
      'available',
    ]);
    expect(runToRest({ state: decideRequest({ state: 'available' }, 'commission').to })).toEqual([
      'commissioning',
      'available',
    ]);
  });

  it('deploys an available machine to deployed, releases it to available and retires it to retired', () => {
    expect(runToRest({ state: decideRequest({ state: 'available' }, 'deploy').to })).toEqual(['deploying', 'deployed']);
    expect(runToRest({ state: decideRequest({ state: 'deployed' }, 'release').to })).toEqual([
      'releasing',
      'available',
    ]);
    expect(runToRest({ state: decideRequest({ state: 'available' }, 'retire').to })).toEqual(['retiring', 'retired']);
  });

  it('accepts each request in exactly the states of its table, and refuses every other with INVALID_STATE naming it', () => {
    for (const verb of VERBS_ON_NODES) {
      for (const state of NODE_STATES) {
        const decide = () => decideRequest({ state }, verb);
        if (ACCEPTED_IN[verb].includes(state)) {
          expect(decide().from).toBe(state);
        } else {
          expect(decide).toThrowError(
            expect.objectContaining({
              code: 'INVALID_STATE',
              message: `cannot ${verb} a machine in state '${state}'`,
              details: { reason: 'illegal-move', state, verb },
            }),
          );
        }
      }
      expect(() => decideRequest(undefined, verb)).toThrowError(
        expect.objectContaining({ code: 'INVALID_STATE', message: `cannot ${verb} a machine that is not enrolled` }),
      );
    }
  });

  it('fails a machine whose phase workflow failed or was cancelled, keeping the phase for recover', () => {
    for (const outcome of ['failed', 'cancelled'] as const) {
      expect(decideWorkflowEnd({ state: 'deploying' }, outcome)).toMatchObject({
        to: 'failed',
        startsWorkflow: false,
        failedFrom: 'deploying',
      });
    }
  });

  it('recovers a failed machine by running the phase it failed in again, still as part of its enroll', () => {
    const failed = decideWorkflowEnd({ state: 'commissioning', enrolling: true }, 'failed');
    expect(failed).toMatchObject({ to: 'failed', failedFrom: 'commissioning', enrolling: true });
    const recovered = decideRequest({ state: 'failed', failedFrom: 'commissioning', enrolling: true }, 'recover');
    expect(recovered).toMatchObject({ to: 'commissioning', startsWorkflow: true, enrolling: true });
    expect(runToRest({ state: recovered.to, enrolling: recovered.enrolling })).toEqual(['commissioning', 'available']);
  });

  it('recovers a failed machine whose phase is unknown through a fresh inspect back to available', () => {
    const recovered = decideRequest({ state: 'failed' }, 'recover');
    expect(recovered).toMatchObject({ to: 'inspecting', enrolling: false });
    expect(runToRest({ state: recovered.to })).toEqual(['inspecting', 'available']);
  });

  it('aborts a machine in a phase to failed, and leaves a machine an abort already moved where it is', () => {
    expect(decideRequest({ state: 'inspecting', enrolling: true }, 'abort')).toMatchObject({
      to: 'failed',
      startsWorkflow: false,
      failedFrom: 'inspecting',
      enrolling: true,
    });
    expect(decideWorkflowEnd({ state: 'failed', failedFrom: 'inspecting' }, 'cancelled')).toBeUndefined();
    expect(decideWorkflowEnd({ state: 'available' }, 'succeeded')).toBeUndefined();
  });

  it('holds an enroll where it asked, and continues it only with inspect or commission (or retires it)', () => {
    const enroll = decideRequest(undefined, 'enroll', { holdAfter: 'inspecting' });
    expect(enroll).toMatchObject({ to: 'enrolling', holdAfter: 'inspecting', held: false });
    const inspecting = decideWorkflowEnd({ state: 'enrolling', enrolling: true, holdAfter: 'inspecting' }, 'succeeded');
    expect(inspecting).toMatchObject({ to: 'inspecting', startsWorkflow: true, holdAfter: 'inspecting' });
    const held = decideWorkflowEnd({ state: 'inspecting', enrolling: true, holdAfter: 'inspecting' }, 'succeeded');
    expect(held).toEqual({
      from: 'inspecting',
      to: 'inspecting',
      startsWorkflow: false,
      enrolling: true,
      failedFrom: undefined,
      holdAfter: 'inspecting',
      held: true,
    });
    const heldNode = { state: 'inspecting' as const, enrolling: true, holdAfter: 'inspecting' as const, held: true };
    expect(decideWorkflowEnd(heldNode, 'succeeded')).toBeUndefined();
    expect(decideRequest(heldNode, 'commission')).toMatchObject({ to: 'commissioning', enrolling: true, held: false });
    expect(decideRequest(heldNode, 'inspect')).toMatchObject({ to: 'inspecting', holdAfter: 'inspecting' });
    expect(decideRequest(heldNode, 'retire')).toMatchObject({ to: 'retiring', enrolling: false });
    for (const verb of ['deploy', 'release', 'abort', 'recover'] as const) {
      expect(() => decideRequest(heldNode, verb), verb).toThrowError(
        expect.objectContaining({ code: 'INVALID_STATE', details: expect.objectContaining({ held: true, verb }) }),
      );
    }
    const heldEnrolling = { state: 'enrolling' as const, enrolling: true, holdAfter: 'enrolling' as const, held: true };
    expect(decideRequest(heldEnrolling, 'inspect')).toMatchObject({
      to: 'inspecting',
      enrolling: true,
      holdAfter: undefined,
    });
    expect(() => decideRequest(heldEnrolling, 'commission')).toThrowError(
      expect.objectContaining({ code: 'INVALID_STATE' }),
    );
    // A failed phase of a held enroll keeps the hold for recover.
    const failed = decideWorkflowEnd({ state: 'enrolling', enrolling: true, holdAfter: 'enrolling' }, 'failed');
    expect(failed).toMatchObject({ to: 'failed', failedFrom: 'enrolling', holdAfter: 'enrolling' });
    expect(
      decideRequest({ state: 'failed', failedFrom: 'enrolling', enrolling: true, holdAfter: 'enrolling' }, 'recover'),
    ).toMatchObject({ to: 'enrolling', holdAfter: 'enrolling', enrolling: true });
  });
});
