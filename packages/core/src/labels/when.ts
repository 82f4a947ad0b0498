import { ComputeError, type ErrorPath } from '../errors';
import { LABEL_KEY_PATTERN, type Labels, MAX_LABEL_VALUE_LENGTH } from './labels';

/** One condition of a `when` expression; an expression holds when all of its terms do. */
export type WhenTerm =
  | { readonly kind: 'present'; readonly key: string }
  | { readonly kind: 'absent'; readonly key: string }
  | { readonly kind: 'equals'; readonly key: string; readonly value: string }
  | { readonly kind: 'notEquals'; readonly key: string; readonly value: string };

/**
 * A parsed `when` expression: its terms (joined by `&&`) and the text it came from. No terms means false.
 *
 * @example
 * ```ts
 * const when: WhenExpression = parseWhen('!mig.capable'); // { source: '!mig.capable', terms: [{ kind: 'absent', key: 'mig.capable' }] }
 * ```
 */
export interface WhenExpression {
  readonly source: string;
  readonly terms: readonly WhenTerm[];
}

/**
 * The longest `when` expression accepted, in characters.
 *
 * @example
 * ```ts
 * parseWhen('a'.repeat(MAX_WHEN_LENGTH + 1)); // throws INVALID_CONFIG
 * ```
 */
export const MAX_WHEN_LENGTH = 4096;

const KEY_CHARACTER = /[a-z0-9._/-]/;
const WHITESPACE = /\s/;
// Operators, and characters kept back for a later grammar (grouping, `||`, quoting), never end up inside a value.
const RESERVED_IN_VALUE = new Set(['&', '!', '=', '|', '(', ')', '"', "'"]);
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

function describeCharacter(character: string): string {
  return /^[\x21-\x7e]$/.test(character)
    ? `"${character}"`
    : `U+${(character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

class WhenParser {
  private position = 0;

  constructor(
    private readonly source: string,
    private readonly path: ErrorPath,
  ) {}

  parse(): WhenTerm[] {
    const terms: WhenTerm[] = [];
    this.skipWhitespace();
    if (this.atEnd()) return terms;
    for (;;) {
      terms.push(this.term());
      this.skipWhitespace();
      if (this.atEnd()) return terms;
      if (!this.source.startsWith('&&', this.position)) {
        this.fail(`expected "&&" or the end, found ${describeCharacter(this.peek())}`);
      }
      this.position += 2;
      this.skipWhitespace();
      if (this.atEnd()) this.fail('expected a label key after "&&", found the end');
    }
  }

  private term(): WhenTerm {
    if (this.peek() === '!') {
      this.position += 1;
      this.skipWhitespace();
      return { kind: 'absent', key: this.key() };
    }
    const key = this.key();
    this.skipWhitespace();
    if (this.peek() === '=') {
      this.position += 1;
      return { kind: 'equals', key, value: this.value() };
    }
    if (this.source.startsWith('!=', this.position)) {
      this.position += 2;
      return { kind: 'notEquals', key, value: this.value() };
    }
    return { kind: 'present', key };
  }

  private key(): string {
    const start = this.position;
    while (!this.atEnd() && KEY_CHARACTER.test(this.peek())) this.position += 1;
    if (this.position === start) {
      this.fail(this.atEnd() ? 'expected a label key, found the end' : `expected a label key, found ${this.found()}`);
    }
    const next = this.peek();
    if (!this.atEnd() && !WHITESPACE.test(next) && next !== '=' && next !== '!' && next !== '&') {
      this.fail(`${describeCharacter(next)} is not allowed in a label key (a-z, 0-9, ".", "_", "/", "-")`);
    }
    const key = this.source.slice(start, this.position);
    if (!LABEL_KEY_PATTERN.test(key)) {
      if (key.length > 63) this.fail('a label key is at most 63 characters', start + 63);
      this.fail('a label key starts with a letter or a digit', start);
    }
    return key;
  }

  private value(): string {
    this.skipWhitespace();
    const start = this.position;
    while (!this.atEnd() && this.isValueCharacter(this.peek())) this.position += 1;
    if (this.position === start) {
      this.fail(this.atEnd() ? 'expected a value, found the end' : `expected a value, found ${this.found()}`);
    }
    if (this.position - start > MAX_LABEL_VALUE_LENGTH) {
      this.fail(`a value is at most ${MAX_LABEL_VALUE_LENGTH} characters`, start + MAX_LABEL_VALUE_LENGTH);
    }
    const next = this.peek();
    if (!this.atEnd() && next !== '&' && !WHITESPACE.test(next)) {
      this.fail(`${describeCharacter(next)} is not allowed in a value`);
    }
    return this.source.slice(start, this.position);
  }

  private isValueCharacter(character: string): boolean {
    return !WHITESPACE.test(character) && !RESERVED_IN_VALUE.has(character) && !CONTROL_CHARACTER.test(character);
  }

  private found(): string {
    return describeCharacter(this.peek());
  }

  private skipWhitespace(): void {
    while (!this.atEnd() && WHITESPACE.test(this.peek())) this.position += 1;
  }

  private atEnd(): boolean {
    return this.position >= this.source.length;
  }

  private peek(): string {
    return this.source.charAt(this.position);
  }

  private fail(message: string, position = this.position): never {
    throw new ComputeError('INVALID_CONFIG', `invalid when expression at ${position}: ${message}`, {
      details: { path: this.path, position },
    });
  }
}

/**
 * Parses a `when` label expression: terms `key` (the label is present and not `'false'`), `!key` (absent or
 * `'false'`), `key=value` and `key!=value`, joined by `&&`, with optional whitespace around every token. An empty or
 * blank expression parses to no terms, which evaluates to false. Bad syntax is INVALID_CONFIG with `details.path` and
 * `details.position`, the 0-based offset of the problem (the length of the text when it ended too early).
 *
 * @example
 * ```ts
 * parseWhen('nvswitch && gpu.model=H100').terms;
 * // [{ kind: 'present', key: 'nvswitch' }, { kind: 'equals', key: 'gpu.model', value: 'H100' }]
 * parseWhen('a &&', ['steps', 3, 'when']); // throws INVALID_CONFIG, details { path: ['steps', 3, 'when'], position: 4 }
 * ```
 */
export function parseWhen(expression: string, path: ErrorPath = []): WhenExpression {
  if (typeof expression !== 'string') {
    throw new ComputeError('INVALID_CONFIG', 'a when expression must be a string', { details: { path, position: 0 } });
  }
  if (expression.length > MAX_WHEN_LENGTH) {
    throw new ComputeError('INVALID_CONFIG', `a when expression is at most ${MAX_WHEN_LENGTH} characters`, {
      details: { path, position: MAX_WHEN_LENGTH },
    });
  }
  const terms = new WhenParser(expression, path).parse().map((term) => Object.freeze(term));
  return Object.freeze({ source: expression, terms: Object.freeze(terms) });
}

/**
 * Checks a `when` expression where it is defined, throwing what {@link parseWhen} throws.
 *
 * @example
 * ```ts
 * checkWhen(unit.when, ['hostConfig', 'units', 0, 'when']);
 * ```
 */
export function checkWhen(expression: string, path: ErrorPath = []): void {
  parseWhen(expression, path);
}

function labelIs(labels: Labels, key: string): string | undefined {
  if (typeof labels !== 'object' || labels === null) return undefined;
  // Own properties only: a label named `constructor` must not find Object.prototype.constructor.
  if (!Object.hasOwn(labels, key)) return undefined;
  const value: unknown = labels[key];
  return typeof value === 'string' ? value : undefined;
}

function termHolds(term: WhenTerm, labels: Labels): boolean {
  const value = labelIs(labels, term.key);
  switch (term.kind) {
    case 'present':
      return value !== undefined && value !== 'false';
    case 'absent':
      return value === undefined || value === 'false';
    case 'equals':
      return value === term.value;
    case 'notEquals':
      return value !== term.value;
  }
}

const TERM_KINDS: ReadonlySet<unknown> = new Set(['present', 'absent', 'equals', 'notEquals']);

function isTerm(term: unknown): term is WhenTerm {
  if (typeof term !== 'object' || term === null) return false;
  const { kind, key, value } = term as Record<string, unknown>;
  if (!TERM_KINDS.has(kind) || typeof key !== 'string') return false;
  return kind === 'present' || kind === 'absent' || typeof value === 'string';
}

// A parsed expression is checked by shape rather than by identity, so one parsed by another copy of the package still
// evaluates; anything else is refused like a non-string source, instead of failing on a property read.
function checkParsed(expression: unknown): WhenExpression {
  const terms: unknown = (expression as { terms?: unknown } | null | undefined)?.terms;
  if (typeof expression !== 'object' || !Array.isArray(terms) || !terms.every(isTerm)) {
    throw new ComputeError('INVALID_CONFIG', 'a when expression must be a string or what parseWhen returns', {
      details: { path: [], position: 0 },
    });
  }
  return expression as WhenExpression;
}

/**
 * Evaluates a `when` expression (text or parsed) against a node's labels: true when every term holds, false for an
 * expression with no terms. `key!=value` holds when the label is missing, too.
 *
 * @example
 * ```ts
 * evaluateWhen('nvswitch && gpu.model=H100', { nvswitch: 'true', 'gpu.model': 'H100' }); // true
 * evaluateWhen('!mig.capable', { 'mig.capable': 'false' }); // true
 * evaluateWhen('', {}); // false
 * ```
 */
export function evaluateWhen(expression: string | WhenExpression, labels: Labels): boolean {
  const parsed = typeof expression === 'string' ? parseWhen(expression) : checkParsed(expression);
  if (parsed.terms.length === 0) return false;
  return parsed.terms.every((term) => termHolds(term, labels));
}
