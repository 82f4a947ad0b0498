import { ComputeError, type ErrorPath } from '@better-compute/core';
import { assertJson, isPlainObject, refuseInput, requireText } from '@better-compute/core/checks';
import { AGENT_ROLES, type AgentRole, MAX_COMMAND_REASON_LENGTH, MAX_POLL_LIMIT } from '@better-compute/core/kernel';
import { fromBase64 } from '../crypto/encoding';

// Hand-written checks: each refusal is INVALID_INPUT with `details.path`, and no message quotes the value (a body may
// carry a join token or a key).

/**
 * The largest inventory an agent may report, as JSON text: 64 KiB.
 *
 * @example
 * ```ts
 * Buffer.byteLength(JSON.stringify(inventory)) <= MAX_INVENTORY_BYTES;
 * ```
 */
export const MAX_INVENTORY_BYTES = 64 * 1024;

/**
 * The body as an object whose keys are all in `allowed`; anything else is INVALID_INPUT at the body or the unknown key.
 *
 * @example
 * ```ts
 * const body = requireBody(raw, ['commandId']);
 * ```
 */
export function requireBody(value: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (!isPlainObject(value)) refuseInput('the request body must be a JSON object', []);
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) refuseInput(`unknown field ${JSON.stringify(key.slice(0, 64))}`, [key]);
  }
  return value;
}

/**
 * An optional integer from `min` to `max`; undefined when absent.
 *
 * @example
 * ```ts
 * const limit = optionalInteger(body.limit, ['limit'], 1, 100);
 * ```
 */
export function optionalInteger(value: unknown, path: ErrorPath, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    refuseInput(`${path.join('.')} must be an integer from ${min} to ${max}`, path);
  }
  return value;
}

/**
 * A command id (a non-empty string).
 *
 * @example
 * ```ts
 * const commandId = requireCommandId(body.commandId);
 * ```
 */
export function requireCommandId(value: unknown): string {
  return requireText(value, ['commandId'], { max: 128 });
}

/**
 * A reason an agent gives for failing or rejecting a command.
 *
 * @example
 * ```ts
 * const reason = requireReason(body.reason);
 * ```
 */
export function requireReason(value: unknown): string {
  return requireText(value, ['reason'], { max: MAX_COMMAND_REASON_LENGTH });
}

/**
 * A session role (one of core's `AGENT_ROLES`).
 *
 * @example
 * ```ts
 * const role = requireRole(body.role); // 'ramdisk'
 * ```
 */
export function requireRole(value: unknown): AgentRole {
  if (!(AGENT_ROLES as readonly unknown[]).includes(value)) {
    refuseInput(`role must be one of ${AGENT_ROLES.join(', ')}`, ['role']);
  }
  return value as AgentRole;
}

/**
 * A public key as pki reads it (a JWK object or an SPKI PEM string); its contents are checked by pki.
 *
 * @example
 * ```ts
 * const publicKey = requirePublicKeyShape(body.publicKey);
 * ```
 */
export function requirePublicKeyShape(value: unknown): string | Record<string, unknown> {
  if (typeof value === 'string' && value.length > 0 && value.length <= 16 * 1024) return value;
  if (isPlainObject(value)) return value;
  return refuseInput('publicKey must be a JWK object or an SPKI PEM string', ['publicKey']);
}

/**
 * What `commands.poll` takes: `limit` (1–100, default 10) and `waitMs` (how long to hold the request when there is
 * nothing, 0 to 3,600,000; the API bounds it by its `longPollMaxMs`; default 0).
 *
 * @example
 * ```ts
 * const { limit, waitMs } = parsePollBody({ limit: 5, waitMs: 20_000 });
 * ```
 */
export function parsePollBody(raw: unknown): { limit?: number; waitMs: number } {
  const body = requireBody(raw, ['limit', 'waitMs']);
  const limit = optionalInteger(body.limit, ['limit'], 1, MAX_POLL_LIMIT);
  const waitMs = optionalInteger(body.waitMs, ['waitMs'], 0, 3_600_000) ?? 0;
  return limit === undefined ? { waitMs } : { limit, waitMs };
}

/** The `attested` part of a node-signed result, as `verifyAttestedResult` reads it. */
export interface AttestedInput {
  alg: 'ed25519' | 'es256';
  signature: string;
  certificateSerial: string;
}

/**
 * What `commands.complete` takes: `result` (base64 bytes), and `attested` (`{ alg, signature, certificateSerial }`,
 * the node's signature over exactly those bytes), which needs a result.
 *
 * @example
 * ```ts
 * const { commandId, result, attested } = parseCompleteBody({ commandId, result: 'eyJvayI6dHJ1ZX0=' });
 * ```
 */
export function parseCompleteBody(raw: unknown): { commandId: string; result?: Uint8Array; attested?: AttestedInput } {
  const body = requireBody(raw, ['commandId', 'result', 'attested']);
  const commandId = requireCommandId(body.commandId);
  const out: { commandId: string; result?: Uint8Array; attested?: AttestedInput } = { commandId };
  if (body.result !== undefined) {
    if (body.result === '') out.result = new Uint8Array();
    else out.result = fromBase64(body.result, ['result']);
  }
  if (body.attested !== undefined) {
    const attested = body.attested;
    if (!isPlainObject(attested)) refuseInput('attested must be an object', ['attested']);
    requireBody(attested, ['alg', 'signature', 'certificateSerial']);
    if (attested.alg !== 'ed25519' && attested.alg !== 'es256') {
      refuseInput('attested.alg must be ed25519 or es256', ['attested', 'alg']);
    }
    fromBase64(attested.signature, ['attested', 'signature']);
    if (typeof attested.certificateSerial !== 'string' || !/^[0-9a-fA-F]{1,64}$/.test(attested.certificateSerial)) {
      refuseInput('attested.certificateSerial must be hex', ['attested', 'certificateSerial']);
    }
    if (out.result === undefined) refuseInput('an attested result needs its result bytes', ['result']);
    out.attested = {
      alg: attested.alg,
      signature: attested.signature as string,
      certificateSerial: attested.certificateSerial,
    };
  }
  return out;
}

/**
 * What `inventory.report` takes: `inventory`, a JSON object of at most {@link MAX_INVENTORY_BYTES} as JSON text.
 *
 * @example
 * ```ts
 * const inventory = parseInventoryBody({ inventory: { cpu: { cores: 64 } } });
 * ```
 */
export function parseInventoryBody(raw: unknown): Record<string, unknown> {
  const body = requireBody(raw, ['inventory']);
  const inventory = body.inventory;
  if (!isPlainObject(inventory)) refuseInput('inventory must be a JSON object', ['inventory']);
  assertJson(inventory, ['inventory'], 'INVALID_INPUT');
  const bytes = Buffer.byteLength(JSON.stringify(inventory), 'utf8');
  if (bytes > MAX_INVENTORY_BYTES) {
    throw new ComputeError('INVALID_INPUT', `inventory must be at most ${MAX_INVENTORY_BYTES} bytes as JSON`, {
      details: { path: ['inventory'], reason: 'body-too-large', limitBytes: MAX_INVENTORY_BYTES },
    });
  }
  return inventory;
}
