import type { ErrorPath } from '@better-compute/core';
import { refuseConfig } from '@better-compute/core/checks';
import { BUILTIN_USER_DATA_TEMPLATES } from './builtin-templates';
import type { UserDataTemplate } from './render-template';

/**
 * What `provisionModule({ userData })` takes: the values every render gets, and templates by name. A template named
 * like a built-in (`cloud-init`, `ignition`) replaces it.
 *
 * @example
 * ```ts
 * const userData: UserDataOptions = {
 *   controlPlaneUrl: 'https://gw.eu-1.example.com',
 *   bcdUrl: 'https://downloads.example.com/bcd/0.2.0/bcd-linux-amd64',
 *   bcdSha256: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
 *   templates: { 'acme-talos.yaml': acmeTalosTemplate },
 * };
 * ```
 */
export interface UserDataOptions {
  /** Where agents reach the control plane: an http(s) URL. */
  controlPlaneUrl?: string;
  /** Where the installed OS downloads bcd: an http(s) URL. */
  bcdUrl?: string;
  /** The SHA-256 of that download: 64 hexadecimal digits (stored lower-case). */
  bcdSha256?: string;
  /** Templates a profile's `userData.template` names (1 to 128 characters). */
  templates?: { readonly [name: string]: UserDataTemplate };
}

/** {@link UserDataOptions} checked: lower-case digest, frozen copy of the templates. */
export interface CheckedUserDataOptions {
  readonly controlPlaneUrl?: string;
  readonly bcdUrl?: string;
  readonly bcdSha256?: string;
  readonly templates: Readonly<Record<string, UserDataTemplate>>;
}

/** A profile's `userData`. */
export interface ProfileUserData {
  readonly kind: string;
  readonly template?: string;
}

function checkUrl(value: unknown, path: ErrorPath, name: string): string {
  if (typeof value !== 'string' || value.length > 2048) refuseConfig(`${name} must be an http(s) URL`, path);
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || /\s/.test(value)) {
    refuseConfig(`${name} must be an http(s) URL`, path);
  }
  return value;
}

/**
 * Checks `provisionModule({ userData })`: URLs are http(s), the digest 64 hex digits, each template a string or a
 * function under a name of 1 to 128 characters. Refusals are INVALID_CONFIG at `['userData', …]`.
 *
 * @example
 * ```ts
 * const checked = checkUserDataOptions({ bcdSha256: 'AB…' }); // bcdSha256 lower-cased
 * ```
 */
export function checkUserDataOptions(options: unknown, path: ErrorPath = ['userData']): CheckedUserDataOptions {
  if (options === undefined) return Object.freeze({ templates: Object.freeze({}) });
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    refuseConfig('userData must be an object { controlPlaneUrl?, bcdUrl?, bcdSha256?, templates? }', path);
  }
  const given = options as Record<string, unknown>;
  const known = new Set(['controlPlaneUrl', 'bcdUrl', 'bcdSha256', 'templates']);
  for (const key of Object.keys(given)) {
    if (!known.has(key)) refuseConfig(`userData has no field ${JSON.stringify(key)}`, [...path, key]);
  }
  const checked: { -readonly [K in keyof CheckedUserDataOptions]: CheckedUserDataOptions[K] } = { templates: {} };
  if (given.controlPlaneUrl !== undefined) {
    checked.controlPlaneUrl = checkUrl(given.controlPlaneUrl, [...path, 'controlPlaneUrl'], 'controlPlaneUrl');
  }
  if (given.bcdUrl !== undefined) checked.bcdUrl = checkUrl(given.bcdUrl, [...path, 'bcdUrl'], 'bcdUrl');
  if (given.bcdSha256 !== undefined) {
    const sha = given.bcdSha256;
    if (typeof sha !== 'string' || !/^[0-9a-fA-F]{64}$/.test(sha)) {
      refuseConfig('bcdSha256 must be 64 hexadecimal digits', [...path, 'bcdSha256']);
    }
    checked.bcdSha256 = sha.toLowerCase();
  }
  if (given.templates !== undefined) {
    const templates = given.templates;
    if (typeof templates !== 'object' || templates === null || Array.isArray(templates)) {
      refuseConfig('templates must be an object of name → template', [...path, 'templates']);
    }
    const copy: Record<string, UserDataTemplate> = Object.create(null);
    for (const [name, template] of Object.entries(templates)) {
      if (name.length < 1 || name.length > 128) {
        refuseConfig('a template name has 1 to 128 characters', [...path, 'templates', name]);
      }
      if (typeof template !== 'string' && typeof template !== 'function') {
        refuseConfig('a template is a string with {{name}} placeholders or a function', [...path, 'templates', name]);
      }
      copy[name] = template as UserDataTemplate;
    }
    checked.templates = Object.freeze(copy);
  }
  return Object.freeze(checked);
}

/**
 * The template a profile's `userData` renders with: the registered template named `template` (or, without one, a
 * registered template named after the kind), else the built-in of that name. An unregistered name, and a kind with no
 * built-in (`talos`) and no template, are INVALID_CONFIG at `['userData', 'template']`.
 *
 * @example
 * ```ts
 * resolveUserDataTemplate(checked, { kind: 'talos', template: 'acme-talos.yaml' });
 * ```
 */
export function resolveUserDataTemplate(options: CheckedUserDataOptions, userData: ProfileUserData): UserDataTemplate {
  const name = userData.template ?? userData.kind;
  if (Object.hasOwn(options.templates, name)) return options.templates[name] as UserDataTemplate;
  if (Object.hasOwn(BUILTIN_USER_DATA_TEMPLATES, name)) return BUILTIN_USER_DATA_TEMPLATES[name] as UserDataTemplate;
  if (userData.template !== undefined) {
    refuseConfig(`no user-data template named ${JSON.stringify(name)} is registered`, ['userData', 'template']);
  }
  return refuseConfig(
    `user data of kind ${JSON.stringify(userData.kind)} ships no template: name one registered with provisionModule({ userData: { templates } })`,
    ['userData', 'template'],
  );
}
