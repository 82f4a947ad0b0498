import { ComputeError, isComputeError } from '@better-compute/core';

/**
 * The variables a user-data template is rendered with, in the order the pages list them.
 *
 * @example
 * ```ts
 * USER_DATA_VARIABLES.includes('joinToken'); // true
 * ```
 */
export const USER_DATA_VARIABLES = Object.freeze([
  'nodeId',
  'hostname',
  'joinToken',
  'controlPlaneUrl',
  'bcdUrl',
  'bcdSha256',
] as const);

/** One of {@link USER_DATA_VARIABLES}. */
export type UserDataVariableName = (typeof USER_DATA_VARIABLES)[number];

/**
 * Every variable of a render: `nodeId`, `hostname` (the node id with `_` as `-`), `joinToken` (a fresh single-use
 * `provisioned` token), `controlPlaneUrl`, `bcdUrl` and `bcdSha256` (from `provisionModule({ userData })`).
 *
 * @example
 * ```ts
 * const template = (v: UserDataVariables) => `#!/bin/sh\nhostnamectl set-hostname ${v.hostname}\n`;
 * ```
 */
export type UserDataVariables = { readonly [K in UserDataVariableName]: string };

/**
 * What {@link renderTemplate} takes: some of the variables (a render needs only the ones its template uses), and any
 * other string a registered template wants.
 *
 * @example
 * ```ts
 * const values: UserDataValues = { hostname: 'node-01k…', joinToken: token };
 * ```
 */
export type UserDataValues = { readonly [K in UserDataVariableName]?: string } & {
  readonly [name: string]: string | undefined;
};

/**
 * A user-data template: a string with `{{name}}` placeholders, or a function of the variables that builds the
 * document (build structured formats as data and serialize them, as the built-in templates do).
 *
 * @example
 * ```ts
 * const autoinstall: UserDataTemplate = '#cloud-config\nautoinstall:\n  identity:\n    hostname: {{hostname}}\n';
 * const ignition: UserDataTemplate = (v) => JSON.stringify({ ignition: { version: '3.3.0' }, hostname: v.hostname });
 * ```
 */
export type UserDataTemplate = string | ((variables: UserDataVariables) => string);

// `{{name}}` exactly: no spaces inside, so Jinja (`{{ ds.meta_data.x }}`) and Go templates pass through untouched.
const PLACEHOLDER = /\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}/g;
const KNOWN: ReadonlySet<string> = new Set(USER_DATA_VARIABLES);

/**
 * Whether a value could start a new line in some format a template renders: a line break (`\n`, `\r`, vertical tab,
 * form feed, NEL, U+2028, U+2029) or any other control character except tab.
 */
function breaksLines(value: string): boolean {
  for (let i = 0; i < value.length; i += 1) {
    const code = value.charCodeAt(i);
    if (code === 0x09) continue;
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f) || code === 0x2028 || code === 0x2029) return true;
  }
  return false;
}

/**
 * Checks the values of a render: each a string with no line break (nor other control character) and no `{{`.
 * INVALID_INPUT at `['values', name]`; the message never repeats the value (it may be a token).
 *
 * @example
 * ```ts
 * checkUserDataValues({ hostname: 'node-1' }); // { hostname: 'node-1' }
 * ```
 */
export function checkUserDataValues(values: unknown): Readonly<Record<string, string>> {
  if (typeof values !== 'object' || values === null || Array.isArray(values)) {
    throw new ComputeError('INVALID_INPUT', 'values must be an object of strings', { details: { path: ['values'] } });
  }
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined) continue;
    const path = ['values', name];
    if (typeof value !== 'string') {
      throw new ComputeError('INVALID_INPUT', `values.${name} must be a string`, { details: { path } });
    }
    if (breaksLines(value)) {
      throw new ComputeError('INVALID_INPUT', `values.${name} has a line break or a control character`, {
        details: { path },
      });
    }
    if (value.includes('{{')) {
      throw new ComputeError('INVALID_INPUT', `values.${name} contains {{`, { details: { path } });
    }
    clean[name] = value;
  }
  return Object.freeze(clean);
}

function missing(name: string): ComputeError {
  return new ComputeError('INVALID_CONFIG', `the template uses {{${name}}}, which has no value`, {
    details: { path: ['template', name], placeholder: name },
  });
}

/** The variables a function template sees: reading a known variable that has no value is INVALID_CONFIG. */
function variablesFor(values: Readonly<Record<string, string>>): UserDataVariables {
  return new Proxy(values, {
    get(target, property, receiver) {
      if (typeof property === 'string' && KNOWN.has(property) && !Object.hasOwn(target, property)) {
        throw missing(property);
      }
      return Reflect.get(target, property, receiver);
    },
  }) as unknown as UserDataVariables;
}

function renderFunction(template: (variables: UserDataVariables) => string, values: Readonly<Record<string, string>>) {
  let document: unknown;
  try {
    document = template(variablesFor(values));
  } catch (error) {
    if (isComputeError(error)) throw error;
    // The thrown message may carry a value (a token): it is not copied.
    throw new ComputeError('INVALID_CONFIG', 'the template function threw', {
      details: { path: ['template'], errorName: error instanceof Error ? error.name : typeof error },
    });
  }
  if (typeof document !== 'string') {
    throw new ComputeError('INVALID_CONFIG', 'a template function must return a string', {
      details: { path: ['template'] },
    });
  }
  return document;
}

/**
 * Renders a user-data template. A string template has each `{{name}}` replaced by its value in one pass (a value is
 * never scanned again); a function template is called with the variables. A value with a line break (or another
 * control character) or `{{` is INVALID_INPUT at `['values', name]`, so a value can never add lines to the document;
 * a placeholder (or a variable a function reads) with no value is INVALID_CONFIG at `['template', name]`.
 *
 * @example
 * ```ts
 * const userData = renderTemplate(autoinstallTemplate, { hostname: node.id.replace(/_/g, '-'), joinToken: token });
 * ```
 */
export function renderTemplate(template: UserDataTemplate, values: UserDataValues): string {
  const clean = checkUserDataValues(values);
  if (typeof template === 'function') return renderFunction(template, clean);
  if (typeof template !== 'string') {
    throw new ComputeError('INVALID_CONFIG', 'a template is a string with {{name}} placeholders or a function', {
      details: { path: ['template'] },
    });
  }
  for (const match of template.matchAll(PLACEHOLDER)) {
    const name = match[1] as string;
    if (!Object.hasOwn(clean, name)) throw missing(name);
  }
  return template.replace(PLACEHOLDER, (_whole, name: string) => clean[name] as string);
}
