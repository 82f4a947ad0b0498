import { ComputeError, type ErrorPath, field, manifest } from 'better-compute/core';
import { MAX_TOKEN_TTL_SECONDS } from 'better-compute/pki';
import {
  checkProfile,
  checkProfileStep,
  defineProfile,
  defineStep,
  type ProfileStep,
  type StepContext,
} from 'better-compute/provision';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { errorOf } from './support/errors';

// defineStep and defineProfile as steps-and-profiles.md (defineStep, Profiles), workflows.md (Step options) and
// DESIGN.md (Profile, ProfileStep) describe them: one row per refusal, each with the exact path.

function expectRefused(run: () => unknown, path: ErrorPath, code = 'INVALID_CONFIG'): ComputeError {
  const error = errorOf(run);
  expect(error).toBeInstanceOf(ComputeError);
  const computeError = error as ComputeError;
  expect({ code: computeError.code, path: computeError.details.path }).toEqual({ code, path });
  return computeError;
}

const noop = async () => undefined;
const input = manifest({});

const controlPlane = {
  id: 'acme.render',
  runsOn: 'control-plane',
  timeout: '1m',
  retrySafe: true,
  input,
  run: noop,
} as const;

const agent = {
  id: 'node.reboot',
  runsOn: 'node',
  command: 'node.reboot',
  timeout: '15m',
  retrySafe: false,
  input,
} as const;

const cyclic: Record<string, unknown> = { a: 1 };
cyclic.self = cyclic;

type Row = [behaviour: string, value: unknown, path: ErrorPath];

describe('defineStep', () => {
  const refusals: Row[] = [
    ['refuses a value that is not an object', 'acme.render', []],
    ['refuses null', null, []],
    ['refuses an array', [controlPlane], []],
    ['refuses an unknown field', { ...controlPlane, colour: 'red' }, ['colour']],
    ['refuses a missing id', { ...controlPlane, id: undefined }, ['id']],
    ['refuses an id that is not a string', { ...controlPlane, id: 42 }, ['id']],
    ['refuses an id with one segment', { ...controlPlane, id: 'render' }, ['id']],
    ['refuses an id with an upper-case first segment', { ...controlPlane, id: 'Acme.render' }, ['id']],
    ['refuses an id whose later segment starts with a digit', { ...controlPlane, id: 'acme.1render' }, ['id']],
    ['refuses an id with an underscore', { ...controlPlane, id: 'acme.render_iso' }, ['id']],
    ['refuses an id longer than 128 characters', { ...controlPlane, id: `acme.${'a'.repeat(124)}` }, ['id']],
    ['refuses an empty version', { ...controlPlane, version: '' }, ['version']],
    ['refuses a version longer than 64 characters', { ...controlPlane, version: '1'.repeat(65) }, ['version']],
    ['refuses a version that is not a string', { ...controlPlane, version: 1 }, ['version']],
    ['refuses a missing runsOn', { ...controlPlane, runsOn: undefined }, ['runsOn']],
    ['refuses an unknown runsOn', { ...controlPlane, runsOn: 'cloud' }, ['runsOn']],
    ['refuses a missing timeout', { ...controlPlane, timeout: undefined }, ['timeout']],
    ['refuses a zero timeout', { ...controlPlane, timeout: 0 }, ['timeout']],
    ['refuses a malformed timeout', { ...controlPlane, timeout: '5x' }, ['timeout']],
    ['refuses fractional retries', { ...controlPlane, retries: 1.5 }, ['retries']],
    ['refuses negative retries', { ...controlPlane, retries: -1 }, ['retries']],
    ['refuses more than 100 retries', { ...controlPlane, retries: 101 }, ['retries']],
    ['refuses a missing retrySafe', { ...controlPlane, retrySafe: undefined }, ['retrySafe']],
    ['refuses a retrySafe that is not a boolean', { ...controlPlane, retrySafe: 'yes' }, ['retrySafe']],
    ['refuses a missing input', { ...controlPlane, input: undefined }, ['input']],
    ['refuses an input that is not a Standard Schema', { ...controlPlane, input: { port: 'int' } }, ['input']],
    ['refuses a control-plane step without run', { ...controlPlane, run: undefined }, ['run']],
    ['refuses a run that is not a function', { ...controlPlane, run: 'render' }, ['run']],
    ['refuses command on a control-plane step', { ...controlPlane, command: 'node.reboot' }, ['command']],
    ['refuses await on a control-plane step', { ...controlPlane, await: 'rejoin' }, ['await']],
    ['refuses relays that are not an array', { ...controlPlane, relays: 'site' }, ['relays']],
    ['refuses relaying to an unknown place', { ...controlPlane, relays: ['rack'] }, ['relays', 0]],
    ['refuses relaying to the control plane', { ...controlPlane, relays: ['site', 'control-plane'] }, ['relays', 1]],
    ['refuses a relay listed twice', { ...controlPlane, relays: ['site', 'node', 'site'] }, ['relays', 2]],
    ['refuses sends that is not an array', { ...controlPlane, sends: 'site.httpProxy' }, ['sends']],
    ['refuses a send that is not a dotted kind', { ...controlPlane, sends: ['proxy'] }, ['sends', 0]],
    [
      'refuses a send with an upper-case first segment',
      { ...controlPlane, sends: ['node.reboot', 'Site.Proxy'] },
      ['sends', 1],
    ],
    ['refuses a send listed twice', { ...controlPlane, sends: ['site.httpProxy', 'site.httpProxy'] }, ['sends', 1]],
    ['refuses an agent step without command', { ...agent, command: undefined }, ['command']],
    ['refuses an agent command that is not a kind name', { ...agent, command: 'Reboot' }, ['command']],
    ['refuses run on an agent step', { ...agent, run: noop }, ['run']],
    ['refuses relays on an agent step', { ...agent, relays: ['site'] }, ['relays']],
    ['refuses sends on an agent step', { ...agent, sends: ['node.reboot'] }, ['sends']],
    ['refuses an await other than rejoin', { ...agent, await: 'reboot' }, ['await']],
    ['refuses a cleanup that is not an array', { ...controlPlane, cleanup: { use: 'media.eject' } }, ['cleanup']],
    ['refuses a cleanup step that is not an object', { ...controlPlane, cleanup: ['media.eject'] }, ['cleanup', 0]],
    [
      'refuses a malformed cleanup step at its field',
      { ...controlPlane, cleanup: [{ use: 'media.eject', on: 'site' }, { use: 'eject' }] },
      ['cleanup', 1, 'use'],
    ],
    [
      'refuses a cleanup step awaiting on the control plane',
      { ...controlPlane, cleanup: [{ use: 'boot.kexec', on: 'control-plane', await: 'rejoin' }] },
      ['cleanup', 0, 'await'],
    ],
    ['refuses a description longer than 4096', { ...controlPlane, description: 'x'.repeat(4097) }, ['description']],
    ['refuses a description that is not a string', { ...controlPlane, description: 42 }, ['description']],
  ];

  it.each(refusals)('%s', (_behaviour, value, path) => {
    expectRefused(() => defineStep(value as never), path);
  });

  it('accepts the autoinstall.renderIso step of the docs', () => {
    const renderAutoinstallIso = defineStep({
      id: 'autoinstall.renderIso',
      runsOn: 'control-plane',
      timeout: '5m',
      retrySafe: false,
      input: manifest({}),
      async run(_input, ctx) {
        const node = ctx.node!;
        return { url: `https://cache.site-a/autoinstall/${node.id}.iso` };
      },
    });
    expect(renderAutoinstallIso.id).toBe('autoinstall.renderIso');
    expect(renderAutoinstallIso.extension).toBe('step');
  });

  it('accepts the wait.talosReady step of the docs, with relays and sends', () => {
    const talosReady = defineStep({
      id: 'wait.talosReady',
      runsOn: 'control-plane',
      relays: ['site'],
      sends: ['site.httpProxy'],
      timeout: '20m',
      retrySafe: true,
      input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) }),
      async run(input) {
        return { url: `https://10.0.0.9:${input.port}/machine/version` };
      },
    });
    expect(talosReady.relays).toEqual(['site']);
    expect(talosReady.sends).toEqual(['site.httpProxy']);
  });

  it('accepts an agent step awaiting a rejoin, with cleanup steps', () => {
    const kexec = defineStep({
      ...agent,
      id: 'boot.kexec',
      runsOn: 'ramdisk',
      command: 'boot.kexec',
      await: 'rejoin',
      retries: 2,
      version: '1.0.0',
      description: 'Boots the installed OS from the ramdisk.',
      cleanup: [{ use: 'power.setPower', on: 'site', with: { action: 'reset' }, timeout: '2m' }],
    });
    expect(kexec.command).toBe('boot.kexec');
    expect(kexec.cleanup?.[0]?.with).toEqual({ action: 'reset' });
  });

  it('treats a field set to undefined as absent', () => {
    const step = defineStep({ ...controlPlane, retries: undefined, colour: undefined } as never);
    expect(Object.keys(step)).not.toContain('retries');
    expect(Object.keys(step)).not.toContain('colour');
  });

  it('returns the step frozen, with extension step, keeping the caller’s input and run', () => {
    const relays: ('site' | 'node')[] = ['site'];
    const cleanup = [{ use: 'media.eject', on: 'site', with: { slot: 'cd' } }] as const;
    const step = defineStep({ ...controlPlane, relays, sends: ['site.httpProxy'], cleanup });
    expect(step.extension).toBe('step');
    expect(Object.isFrozen(step)).toBe(true);
    expect(Object.isFrozen(step.relays)).toBe(true);
    expect(Object.isFrozen(step.sends)).toBe(true);
    expect(Object.isFrozen(step.cleanup)).toBe(true);
    expect(Object.isFrozen(step.cleanup?.[0])).toBe(true);
    expect(Object.isFrozen(step.cleanup?.[0]?.with)).toBe(true);
    expect(step.input).toBe(input);
    expect(step.run).toBe(noop);
    expect(Object.isFrozen(input)).toBe(Object.isFrozen(manifest({})));
    relays.push('node');
    expect(step.relays).toEqual(['site']);
    expect(Object.isFrozen(relays)).toBe(false);
  });

  it('types run’s input from the input manifest and keeps the literal id', () => {
    const step = defineStep({
      id: 'wait.talosReady',
      runsOn: 'control-plane',
      timeout: '20m',
      retrySafe: true,
      input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000), host: field.string().optional() }),
      async run(input, ctx) {
        expectTypeOf(input.port).toEqualTypeOf<number>();
        expectTypeOf(input.host).toEqualTypeOf<string | undefined>();
        expectTypeOf(ctx).toEqualTypeOf<StepContext>();
        return { port: input.port };
      },
    });
    expectTypeOf(step.id).toEqualTypeOf<'wait.talosReady'>();
    expectTypeOf(step.extension).toEqualTypeOf<'step'>();
    expectTypeOf(step.runsOn).toEqualTypeOf<'control-plane'>();
    expectTypeOf(step.run).parameter(0).toEqualTypeOf<{ port: number; host?: string | undefined }>();
    const reboot = defineStep({ ...agent });
    expectTypeOf(reboot.id).toEqualTypeOf<'node.reboot'>();
    expectTypeOf(reboot.command).toEqualTypeOf<string>();
  });
});

const ubuntuAutoinstall = {
  id: 'ubuntu-24.04-autoinstall',
  version: 1,
  target: 'metal',
  role: 'host',
  steps: [
    { use: 'autoinstall.renderIso' },
    { use: 'media.insert', on: 'site', with: { fromStep: 'autoinstall.renderIso' } },
    { use: 'management.setBootDevice', on: 'site', with: { device: 'cd' } },
    { use: 'power.setPower', on: 'site', with: { action: 'cycle' } },
    { use: 'wait.agentJoined', with: { role: 'node' } },
    { use: 'media.eject', on: 'site' },
  ],
} as const;

const minimal = { id: 'inspect', version: 1, target: 'metal' } as const;

/** A profile whose first step is `step`, so rows name the step rule they test. */
function withStep(step: unknown) {
  return { ...minimal, steps: [step] };
}

/** `[first, <hole>, second]`: a sparse array, which JSON cannot hold. */
function holey([first, second]: unknown[]): unknown[] {
  const steps: unknown[] = [first];
  steps[2] = second;
  return steps;
}

function manySteps(count: number, extra: Partial<ProfileStep> = {}): ProfileStep[] {
  return Array.from({ length: count }, () => ({ use: 'diag.dcgm', on: 'node', ...extra }));
}

describe('a profile step (checkProfileStep)', () => {
  const refusals: Row[] = [
    ['refuses a step that is not an object', withStep('power.setPower'), ['steps', 0]],
    ['refuses a null step', withStep(null), ['steps', 0]],
    ['refuses an unknown field', withStep({ use: 'power.setPower', colour: 'red' }), ['steps', 0, 'colour']],
    ['refuses a missing use', withStep({ on: 'site' }), ['steps', 0, 'use']],
    ['refuses a use that is not dotted', withStep({ use: 'reboot' }), ['steps', 0, 'use']],
    ['refuses a use with an upper-case first segment', withStep({ use: 'Power.setPower' }), ['steps', 0, 'use']],
    ['refuses a use longer than 128', withStep({ use: `power.${'a'.repeat(123)}` }), ['steps', 0, 'use']],
    ['refuses an unknown on', withStep({ use: 'power.setPower', on: 'rack' }), ['steps', 0, 'on']],
    ['refuses a with that is an array', withStep({ use: 'power.setPower', with: ['cycle'] }), ['steps', 0, 'with']],
    ['refuses a null with', withStep({ use: 'power.setPower', with: null }), ['steps', 0, 'with']],
    ['refuses a with that is a class instance', withStep({ use: 'a.b', with: new Date() }), ['steps', 0, 'with']],
    ['refuses NaN in with', withStep({ use: 'a.b', with: { port: Number.NaN } }), ['steps', 0, 'with', 'port']],
    ['refuses a Date in with', withStep({ use: 'a.b', with: { at: new Date() } }), ['steps', 0, 'with', 'at']],
    [
      'refuses a function deep in with',
      withStep({ use: 'a.b', with: { a: [1, { b: () => 1 }] } }),
      ['steps', 0, 'with', 'a', 1, 'b'],
    ],
    ['refuses a cycle in with', withStep({ use: 'a.b', with: { c: cyclic } }), ['steps', 0, 'with', 'c', 'self']],
    ['refuses an empty name', withStep({ use: 'a.b', name: '' }), ['steps', 0, 'name']],
    ['refuses a name longer than 256', withStep({ use: 'a.b', name: 'n'.repeat(257) }), ['steps', 0, 'name']],
    ['refuses a name that is not a string', withStep({ use: 'a.b', name: 7 }), ['steps', 0, 'name']],
    ['refuses a malformed when', withStep({ use: 'a.b', when: 'gpu &&' }), ['steps', 0, 'when']],
    ['refuses a when that is not a string', withStep({ use: 'a.b', when: true }), ['steps', 0, 'when']],
    ['refuses a malformed timeout', withStep({ use: 'a.b', timeout: '10 minutes' }), ['steps', 0, 'timeout']],
    ['refuses a zero timeout', withStep({ use: 'a.b', timeout: 0 }), ['steps', 0, 'timeout']],
    ['refuses more than 100 retries', withStep({ use: 'a.b', retries: 101 }), ['steps', 0, 'retries']],
    ['refuses fractional retries', withStep({ use: 'a.b', retries: 0.5 }), ['steps', 0, 'retries']],
    ['refuses an unknown onFailure policy', withStep({ use: 'a.b', onFailure: 'explode' }), ['steps', 0, 'onFailure']],
    ['refuses an onFailure that is a number', withStep({ use: 'a.b', onFailure: 1 }), ['steps', 0, 'onFailure']],
    ['refuses an onFailure that is an array', withStep({ use: 'a.b', onFailure: [] }), ['steps', 0, 'onFailure']],
    [
      'refuses a malformed onFailure step at its field',
      withStep({ use: 'boot.kexec', onFailure: { use: 'power.setPower', on: 'bmc' } }),
      ['steps', 0, 'onFailure', 'on'],
    ],
    [
      'refuses an onFailure step with an onFailure step of its own',
      withStep({ use: 'boot.kexec', onFailure: { use: 'power.setPower', onFailure: { use: 'power.setPower' } } }),
      ['steps', 0, 'onFailure', 'onFailure'],
    ],
    ['refuses an await other than rejoin', withStep({ use: 'a.b', await: 'reboot' }), ['steps', 0, 'await']],
    [
      'refuses await on a control-plane step',
      withStep({ use: 'boot.kexec', on: 'control-plane', await: 'rejoin' }),
      ['steps', 0, 'await'],
    ],
    ['refuses a fallback that is not a step id', withStep({ use: 'a.b', fallback: 'b' }), ['steps', 0, 'fallback']],
  ];

  it.each(refusals)('%s', (_behaviour, value, path) => {
    expectRefused(() => defineProfile(value as never), path);
  });

  it('names paths relative to the base path it is given', () => {
    expectRefused(
      () => checkProfileStep({ use: 'a.b', with: { port: null, n: Number.NaN } }, ['x', 3]),
      ['x', 3, 'with', 'n'],
    );
    expectRefused(() => checkProfileStep(undefined, []), []);
  });

  it('accepts every step option of the workflows page', () => {
    expect(() =>
      checkProfileStep(
        {
          use: 'boot.kexec',
          on: 'ramdisk',
          with: { kernel: 'vmlinuz', args: ['quiet', 1, null, { a: true }] },
          name: 'Boot the installed OS',
          when: 'nvswitch && gpu.model=H100',
          timeout: '15m',
          retries: 0,
          onFailure: { use: 'power.setPower', on: 'site', with: { action: 'reset' }, onFailure: 'continue' },
          await: 'rejoin',
          fallback: 'node.reboot',
        },
        ['steps', 0],
      ),
    ).not.toThrow();
    for (const policy of ['fail', 'continue', 'rescue']) {
      expect(() => checkProfileStep({ use: 'a.b', onFailure: policy }, [])).not.toThrow();
    }
  });
});

describe('defineProfile', () => {
  const refusals: Row[] = [
    ['refuses a value that is not an object', 'inspect', []],
    ['refuses null', null, []],
    ['refuses an array', [minimal], []],
    ['refuses a class instance', new (class Profile {})(), []],
    ['refuses an unknown field', { ...minimal, colour: 'red' }, ['colour']],
    ['refuses a missing id', { ...minimal, id: undefined }, ['id']],
    ['refuses an upper-case id', { ...minimal, id: 'Ubuntu' }, ['id']],
    ['refuses an id with a doubled separator', { ...minimal, id: 'ubuntu--24' }, ['id']],
    ['refuses an id starting with a separator', { ...minimal, id: '-ubuntu' }, ['id']],
    ['refuses an id longer than 128', { ...minimal, id: 'a'.repeat(129) }, ['id']],
    ['refuses a missing version', { ...minimal, version: undefined }, ['version']],
    ['refuses version 0', { ...minimal, version: 0 }, ['version']],
    ['refuses a fractional version', { ...minimal, version: 1.5 }, ['version']],
    ['refuses a version past the safe integers', { ...minimal, version: 2 ** 53 }, ['version']],
    ['refuses a version that is a string', { ...minimal, version: '1' }, ['version']],
    ['refuses a NaN version', { ...minimal, version: Number.NaN }, ['version']],
    ['refuses a missing target', { ...minimal, target: undefined }, ['target']],
    ['refuses an unknown target', { ...minimal, target: 'vm' }, ['target']],
    ['refuses an unknown mode', { ...minimal, mode: 'replace' }, ['mode']],
    ['refuses an upper-case role', { ...minimal, role: 'Host' }, ['role']],
    ['refuses an empty role', { ...minimal, role: '' }, ['role']],
    ['refuses a role longer than 64', { ...minimal, role: 'h'.repeat(65) }, ['role']],
    ['refuses a description longer than 4096', { ...minimal, description: 'd'.repeat(4097) }, ['description']],
    ['refuses a description that is a function', { ...minimal, description: () => 'd' }, ['description']],
    ['refuses a NUL in a string', { ...minimal, description: 'a\u0000b' }, ['description']],
    ['refuses labels that are not an object', { ...minimal, labels: 'gpu' }, ['labels']],
    ['refuses a bad label key', { ...minimal, labels: { 'Bad Key': 'x' } }, ['labels', 'Bad Key']],
    ['refuses a label value that is not a string', { ...minimal, labels: { gpu: 8 } }, ['labels', 'gpu']],
    ['refuses drivers that are not an object', { ...minimal, drivers: 'redfish' }, ['drivers']],
    ['refuses drivers that are an array', { ...minimal, drivers: [] }, ['drivers']],
    ['refuses an unknown driver concern', { ...minimal, drivers: { pdu: { name: 'x' } } }, ['drivers', 'pdu']],
    [
      'refuses a driver binding that is not an object',
      { ...minimal, drivers: { power: 'redfish' } },
      ['drivers', 'power'],
    ],
    [
      'refuses a driver binding without a name',
      { ...minimal, drivers: { power: { driver: 'redfish' } } },
      ['drivers', 'power', 'name'],
    ],
    [
      'refuses a driver name that is not a name',
      { ...minimal, drivers: { power: { name: 'Red fish' } } },
      ['drivers', 'power', 'name'],
    ],
    [
      'refuses a non-JSON value in a driver binding',
      { ...minimal, drivers: { power: { name: 'redfish', since: new Date() } } },
      ['drivers', 'power', 'since'],
    ],
    ['refuses an image without a version', { ...minimal, image: 'ubuntu' }, ['image']],
    ['refuses an upper-case image name', { ...minimal, image: 'Ubuntu@24.04' }, ['image']],
    ['refuses an image longer than 256', { ...minimal, image: `${'u'.repeat(250)}@24.04.1` }, ['image']],
    ['refuses userData that is not an object', { ...minimal, userData: 'cloud-init' }, ['userData']],
    ['refuses a missing userData kind', { ...minimal, userData: {} }, ['userData', 'kind']],
    ['refuses an unknown userData kind', { ...minimal, userData: { kind: 'kickstart' } }, ['userData', 'kind']],
    ['refuses an empty template', { ...minimal, userData: { kind: 'talos', template: '' } }, ['userData', 'template']],
    [
      'refuses a template longer than 128',
      { ...minimal, userData: { kind: 'talos', template: 't'.repeat(129) } },
      ['userData', 'template'],
    ],
    ['refuses an unknown userData field', { ...minimal, userData: { kind: 'talos', url: 'x' } }, ['userData', 'url']],
    ['refuses a zero tokenTtlSeconds', { ...minimal, tokenTtlSeconds: 0 }, ['tokenTtlSeconds']],
    ['refuses a fractional tokenTtlSeconds', { ...minimal, tokenTtlSeconds: 1.5 }, ['tokenTtlSeconds']],
    [
      'refuses a tokenTtlSeconds past the longest join token',
      { ...minimal, tokenTtlSeconds: MAX_TOKEN_TTL_SECONDS + 1 },
      ['tokenTtlSeconds'],
    ],
    ['refuses a hostConfig that is not an object', { ...minimal, hostConfig: [] }, ['hostConfig']],
    ['refuses an unknown hostConfig field', { ...minimal, hostConfig: { units: [], os: 'x' } }, ['hostConfig', 'os']],
    ['refuses a hostConfig without units', { ...minimal, hostConfig: {} }, ['hostConfig', 'units']],
    ['refuses units that are not an array', { ...minimal, hostConfig: { units: {} } }, ['hostConfig', 'units']],
    [
      'refuses a unit that is not an object',
      { ...minimal, hostConfig: { units: ['sysctl'] } },
      ['hostConfig', 'units', 0],
    ],
    [
      'refuses an unknown unit field',
      { ...minimal, hostConfig: { units: [{ name: 'sysctl', value: 1 }] } },
      ['hostConfig', 'units', 0, 'value'],
    ],
    [
      'refuses a malformed unit name',
      { ...minimal, hostConfig: { units: [{ name: 'Sysctl' }] } },
      ['hostConfig', 'units', 0, 'name'],
    ],
    [
      'refuses a unit name longer than 64',
      { ...minimal, hostConfig: { units: [{ name: 's'.repeat(65) }] } },
      ['hostConfig', 'units', 0, 'name'],
    ],
    [
      'refuses a unit named twice',
      { ...minimal, hostConfig: { units: [{ name: 'sysctl' }, { name: 'ntp' }, { name: 'sysctl' }] } },
      ['hostConfig', 'units', 2, 'name'],
    ],
    [
      'refuses unit settings that are not an object',
      { ...minimal, hostConfig: { units: [{ name: 'sysctl', settings: [1] }] } },
      ['hostConfig', 'units', 0, 'settings'],
    ],
    [
      'refuses a non-JSON unit setting',
      { ...minimal, hostConfig: { units: [{ name: 'sysctl', settings: { swappiness: Number.POSITIVE_INFINITY } }] } },
      ['hostConfig', 'units', 0, 'settings', 'swappiness'],
    ],
    [
      'refuses a malformed unit when',
      { ...minimal, hostConfig: { units: [{ name: 'sysctl', when: '&& gpu' }] } },
      ['hostConfig', 'units', 0, 'when'],
    ],
    [
      'refuses drivers on an instance profile',
      { ...minimal, target: 'instance', drivers: { power: { name: 'redfish' } } },
      ['drivers'],
    ],
    [
      'refuses hostConfig on an instance profile',
      { ...minimal, target: 'instance', hostConfig: { units: [] } },
      ['hostConfig'],
    ],
    ['refuses an image on an adopt profile', { ...minimal, mode: 'adopt', image: 'ubuntu@24.04' }, ['image']],
    ['refuses userData on an adopt profile', { ...minimal, mode: 'adopt', userData: { kind: 'talos' } }, ['userData']],
    ['refuses steps on an adopt profile, even none', { ...minimal, mode: 'adopt', steps: [] }, ['steps']],
    ['refuses steps that are not an array', { ...minimal, steps: { use: 'a.b' } }, ['steps']],
    ['refuses acceptance that is not an array', { ...minimal, acceptance: 'diag.dcgm' }, ['acceptance']],
    ['refuses cleanup that is not an array', { ...minimal, cleanup: {} }, ['cleanup']],
    ['refuses a hole in a step list', { ...minimal, steps: holey([{ use: 'a.b' }, { use: 'a.b' }]) }, ['steps', 1]],
    ['refuses a malformed acceptance step', { ...minimal, acceptance: [{ use: 'dcgm' }] }, ['acceptance', 0, 'use']],
    [
      'refuses a malformed cleanup step',
      { ...minimal, cleanup: [{ use: 'media.eject' }, { use: 'media.eject', retries: -1 }] },
      ['cleanup', 1, 'retries'],
    ],
    ['refuses more than 512 steps', { ...minimal, steps: manySteps(513) }, ['steps']],
    [
      'refuses more than 512 steps across steps, acceptance and cleanup',
      { ...minimal, steps: manySteps(300), acceptance: manySteps(200), cleanup: manySteps(13) },
      ['steps'],
    ],
    [
      'counts onFailure steps against the 512',
      { ...minimal, steps: manySteps(256, { onFailure: { use: 'power.setPower' } }), cleanup: manySteps(1) },
      ['steps'],
    ],
  ];

  it.each(refusals)('%s', (_behaviour, value, path) => {
    expectRefused(() => defineProfile(value as never), path);
  });

  it('says drivers and hostConfig are metal fields', () => {
    const drivers = expectRefused(() => defineProfile({ ...minimal, target: 'instance', drivers: {} }), ['drivers']);
    expect(drivers.message).toMatch(/metal/);
    const hostConfig = expectRefused(
      () => defineProfile({ ...minimal, target: 'instance', hostConfig: { units: [] } }),
      ['hostConfig'],
    );
    expect(hostConfig.message).toMatch(/metal/);
  });

  it('accepts the ubuntu-24.04-autoinstall profile of the docs', () => {
    const profile = defineProfile(ubuntuAutoinstall);
    expect(profile).toEqual(ubuntuAutoinstall);
    expect(profile).not.toBe(ubuntuAutoinstall);
  });

  it('accepts every field of a metal profile, and exactly 512 steps', () => {
    const profile = defineProfile({
      id: 'talos-1.9',
      version: 3,
      target: 'metal',
      mode: 'provision',
      role: 'host',
      description: 'Talos on bare metal.',
      labels: { 'gpu.model': 'H100' },
      drivers: { power: { name: 'redfish', insecure: false }, 'virtual-media': { name: 'redfish' } },
      image: 'talos/metal@1.9.0+amd64',
      userData: { kind: 'talos', template: 'acme-talos' },
      tokenTtlSeconds: MAX_TOKEN_TTL_SECONDS,
      hostConfig: { units: [{ name: 'sysctl', settings: { swappiness: 10 }, when: 'gpu' }, { name: 'ntp' }] },
      steps: manySteps(255, { onFailure: { use: 'power.setPower', on: 'site' } }),
      acceptance: [{ use: 'diag.dcgm', on: 'node' }],
      cleanup: [{ use: 'media.eject', on: 'site' }],
    });
    expect(profile.steps).toHaveLength(255);
  });

  it('accepts an adopt profile with acceptance and cleanup, and an instance profile', () => {
    expect(() =>
      defineProfile({ ...minimal, mode: 'adopt', acceptance: manySteps(1), cleanup: manySteps(1) }),
    ).not.toThrow();
    expect(() =>
      defineProfile({ ...minimal, target: 'instance', image: 'ubuntu@24.04', userData: { kind: 'cloud-init' } }),
    ).not.toThrow();
  });

  it('returns a deeply frozen copy and leaves the caller’s object as it was', () => {
    const caller = {
      id: 'inspect',
      version: 1,
      target: 'metal' as const,
      labels: { rack: 'r1' },
      steps: [{ use: 'power.setPower', on: 'site' as const, with: { action: 'cycle', extra: { tries: [1] } } }],
    };
    const profile = defineProfile(caller);
    const step = profile.steps[0];
    expect(Object.isFrozen(profile)).toBe(true);
    expect(Object.isFrozen(profile.labels)).toBe(true);
    expect(Object.isFrozen(profile.steps)).toBe(true);
    expect(Object.isFrozen(step)).toBe(true);
    expect(Object.isFrozen(step?.with.extra.tries)).toBe(true);
    expect(Object.isFrozen(caller)).toBe(false);
    expect(Object.isFrozen(caller.steps[0]?.with.extra.tries)).toBe(false);
    caller.steps[0]?.with.extra.tries.push(2);
    expect(step?.with.extra.tries).toEqual([1]);
  });

  it('treats a field set to undefined as absent and leaves it out of the copy', () => {
    const profile = defineProfile({ ...minimal, role: undefined, steps: [{ use: 'a.b', name: undefined }] });
    expect(Object.keys(profile)).not.toContain('role');
    expect(profile.steps?.[0]).toEqual({ use: 'a.b' });
    expect(Object.keys(profile.steps?.[0] ?? {})).toEqual(['use']);
  });

  it('keeps the literal types of the profile', () => {
    const profile = defineProfile(ubuntuAutoinstall);
    expectTypeOf(profile.id).toEqualTypeOf<'ubuntu-24.04-autoinstall'>();
    expectTypeOf(profile.target).toEqualTypeOf<'metal'>();
  });
});

describe('checkProfile', () => {
  it('refuses a stored document with INVALID_INPUT and the same path', () => {
    expectRefused(() => checkProfile({ ...minimal, colour: 'red' }, 'INVALID_INPUT'), ['colour'], 'INVALID_INPUT');
    expectRefused(
      () => checkProfile(withStep({ use: 'a.b', timeout: '5x' }), 'INVALID_INPUT'),
      ['steps', 0, 'timeout'],
      'INVALID_INPUT',
    );
    expectRefused(
      () => checkProfile(withStep({ use: 'a.b', when: 'a &&' }), 'INVALID_INPUT'),
      ['steps', 0, 'when'],
      'INVALID_INPUT',
    );
    expectRefused(
      () => checkProfile({ ...minimal, labels: { 'Bad Key': 'x' } }, 'INVALID_INPUT'),
      ['labels', 'Bad Key'],
      'INVALID_INPUT',
    );
  });

  it('refuses with INVALID_CONFIG by default', () => {
    expectRefused(() => checkProfile({ ...minimal, version: 0 }), ['version']);
  });

  it('returns the same deeply frozen copy as defineProfile', () => {
    const document = JSON.parse(JSON.stringify(ubuntuAutoinstall)) as unknown;
    const profile = checkProfile(document, 'INVALID_INPUT');
    expect(profile).toEqual(defineProfile(ubuntuAutoinstall));
    expect(Object.isFrozen(profile.steps?.[1]?.with)).toBe(true);
    expect(Object.isFrozen(document)).toBe(false);
  });
});
