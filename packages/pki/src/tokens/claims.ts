import { ComputeError, type HardwareExpectation } from '@better-compute/core';
import { requireObject, requireString } from './validate';

/** The hardware claims a join token can expect. */
export const CLAIM_NAMES = ['mac', 'productUuid', 'serial', 'gpuUuid'] as const;

/** One claim name. */
export type ClaimName = (typeof CLAIM_NAMES)[number];

/** What an agent says about its hardware: each claim one value, or several (a machine has many NICs and GPUs). */
export type HardwareClaims = Partial<Record<ClaimName, string | readonly string[]>>;

// MACs and UUIDs are compared case-insensitively and MACs with any of `:`, `-` or `.` as separators.
function normalize(name: ClaimName, value: string): string {
  const lower = value.trim().toLowerCase();
  return name === 'mac' ? lower.replace(/[-.:]/g, '') : lower;
}

/** Validates an `expect` object; unknown names and non-string values are INVALID_INPUT at `['expect', name]`. */
export function parseExpectation(value: unknown): HardwareExpectation | undefined {
  if (value === undefined || value === null) return undefined;
  const object = requireObject(value, ['expect']);
  const out: HardwareExpectation = {};
  for (const [name, claim] of Object.entries(object)) {
    if (!(CLAIM_NAMES as readonly string[]).includes(name)) {
      throw new ComputeError('INVALID_INPUT', `unknown hardware claim ${name}`, {
        details: { path: ['expect', name] },
      });
    }
    out[name as ClaimName] = requireString(claim, ['expect', name]);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** Validates an agent's claims; each is a string or a list of at most 64 strings, at `['claims', name, i?]`. */
export function parseClaims(value: unknown): HardwareClaims {
  if (value === undefined || value === null) return {};
  const object = requireObject(value, ['claims']);
  const out: HardwareClaims = {};
  for (const [name, claim] of Object.entries(object)) {
    if (!(CLAIM_NAMES as readonly string[]).includes(name)) continue; // agents may report more than we match on
    if (Array.isArray(claim)) {
      if (claim.length > 64) {
        throw new ComputeError('INVALID_INPUT', `too many values for ${name}`, { details: { path: ['claims', name] } });
      }
      out[name as ClaimName] = claim.map((item, i) => requireString(item, ['claims', name, i]));
    } else out[name as ClaimName] = requireString(claim, ['claims', name]);
  }
  return out;
}

/** The names of expected claims the agent's claims do not satisfy (empty when it matches). */
export function mismatchedClaims(expect: HardwareExpectation | undefined | null, claims: HardwareClaims): ClaimName[] {
  if (!expect) return [];
  const failed: ClaimName[] = [];
  for (const name of CLAIM_NAMES) {
    const wanted = expect[name];
    if (wanted === undefined) continue;
    const offered = claims[name];
    const values = offered === undefined ? [] : typeof offered === 'string' ? [offered] : offered;
    if (!values.some((value) => normalize(name, value) === normalize(name, wanted))) failed.push(name);
  }
  return failed;
}
