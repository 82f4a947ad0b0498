import { describe, expect, it } from 'vitest';
import { isComputeError } from '../src/errors';
import { checkWhen, evaluateWhen, type Labels, parseWhen } from '../src/labels';
import { errorOf } from './support/errors';

const H100_NODE: Labels = { nvswitch: 'true', 'gpu.model': 'H100', 'mig.capable': 'false', rack: 'r12' };

describe('when: parsing', () => {
  it.each([
    [
      'nvswitch && gpu.model=H100',
      [
        { kind: 'present', key: 'nvswitch' },
        { kind: 'equals', key: 'gpu.model', value: 'H100' },
      ],
    ],
    ['!mig.capable', [{ kind: 'absent', key: 'mig.capable' }]],
    ['gpu.model!=A100', [{ kind: 'notEquals', key: 'gpu.model', value: 'A100' }]],
    [
      '  a  &&  ! b  &&  c = d  &&  e != f  ',
      [
        { kind: 'present', key: 'a' },
        { kind: 'absent', key: 'b' },
        { kind: 'equals', key: 'c', value: 'd' },
        { kind: 'notEquals', key: 'e', value: 'f' },
      ],
    ],
    ['acme.io/rack-id=r_12:top', [{ kind: 'equals', key: 'acme.io/rack-id', value: 'r_12:top' }]],
    [
      'a\t&&\nb',
      [
        { kind: 'present', key: 'a' },
        { kind: 'present', key: 'b' },
      ],
    ],
    ['', []],
    ['   ', []],
  ])('parses %j', (source, terms) => {
    const parsed = parseWhen(source);
    expect(parsed.terms).toEqual(terms);
    expect(parsed.source).toBe(source);
    expect(Object.isFrozen(parsed.terms)).toBe(true);
  });

  it.each([
    ['a &&', 4],
    ['&& a', 0],
    ['a || b', 2],
    ['=x', 0],
    ['a==b', 2],
    ['a=', 2],
    ['a = ', 4],
    ['(a', 0],
    ['a)', 1],
    ['a && (b)', 5],
    ['a=b)', 3],
    ['a & b', 2],
    ['a b', 2],
    ['!', 1],
    ['!!a', 1],
    ['!a=b', 2],
    ['a !b', 2],
    ['GPU', 0],
    ['gpu.Model=H100', 4],
    ['.hidden', 0],
    ['a=b=c', 3],
    ['a="b"', 2],
    [`${'k'.repeat(64)}`, 63],
    [`a=${'v'.repeat(257)}`, 258],
    ['a && && b', 5],
  ])('refuses %j at position %i', (source, position) => {
    const error = errorOf(() => parseWhen(source, ['steps', 3, 'when']));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as { details: unknown }).details).toEqual({ path: ['steps', 3, 'when'], position });
  });

  it('refuses a non-string expression at position 0', () => {
    const error = errorOf(() => parseWhen(42 as unknown as string, ['when']));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as { details: unknown }).details).toEqual({ path: ['when'], position: 0 });
  });

  it('refuses an expression over the length cap', () => {
    const error = errorOf(() => parseWhen(`a${' && a'.repeat(1000)}`));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
  });

  it('checkWhen throws what parseWhen throws and returns nothing on success', () => {
    expect(checkWhen('nvswitch && gpu.model=H100', ['when'])).toBeUndefined();
    const error = errorOf(() => checkWhen('a ||', ['units', 0, 'when']));
    expect((error as { details: unknown }).details).toEqual({ path: ['units', 0, 'when'], position: 2 });
  });
});

describe('when: evaluation', () => {
  it.each([
    ['nvswitch && gpu.model=H100', H100_NODE, true],
    ['nvswitch && gpu.model=H100', { nvswitch: 'true', 'gpu.model': 'A100' }, false],
    ['nvswitch && gpu.model=H100', { 'gpu.model': 'H100' }, false],
    ['!mig.capable', H100_NODE, true],
    ['!mig.capable', { 'mig.capable': 'true' }, false],
    ['!mig.capable', {}, true],
    ['mig.capable', H100_NODE, false],
    ['mig.capable', { 'mig.capable': 'False' }, true],
    ['missing', H100_NODE, false],
    ['rack', { rack: '' }, true],
    ['gpu.model!=A100', H100_NODE, true],
    ['gpu.model!=H100', H100_NODE, false],
    ['gpu.model!=H100', {}, true],
    ['gpu.model=h100', H100_NODE, false],
    ['', H100_NODE, false],
    ['   ', H100_NODE, false],
    ['constructor', {}, false],
    ['!constructor', {}, true],
  ] as const)('%j on %j is %s', (source, labels, expected) => {
    expect(evaluateWhen(source, labels)).toBe(expected);
    expect(evaluateWhen(parseWhen(source), labels)).toBe(expected);
  });

  it('reads only own labels, never inherited ones', () => {
    const inherited = Object.create({ rack: 'r12' }) as Labels;
    expect(evaluateWhen('rack', inherited)).toBe(false);
    expect(evaluateWhen('rack=r12', inherited)).toBe(false);
  });

  it.each([
    ['a number', 42],
    ['null', null],
    ['undefined', undefined],
    ['an object without terms', {}],
    ['terms that are not a list', { source: 'a', terms: 'a' }],
    ['a term that is null', { source: 'a', terms: [null] }],
    ['a term of an unknown kind', { source: 'a', terms: [{ kind: 'bogus', key: 'a' }] }],
    ['a term without its key', { source: 'a', terms: [{ kind: 'present' }] }],
    ['an equals term without its value', { source: 'a=b', terms: [{ kind: 'equals', key: 'a' }] }],
  ])('refuses %s instead of an expression with INVALID_CONFIG at position 0', (_name, expression) => {
    const error = errorOf(() => evaluateWhen(expression as never, {}));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as { details: unknown }).details).toEqual({ path: [], position: 0 });
  });

  it('throws INVALID_CONFIG when asked to evaluate bad syntax', () => {
    expect(
      isComputeError(
        errorOf(() => evaluateWhen('a ||', {})),
        'INVALID_CONFIG',
      ),
    ).toBe(true);
  });
});
