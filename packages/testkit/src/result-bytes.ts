import { ComputeError, type Json } from '@better-compute/core';
import { assertJson } from '@better-compute/core/checks';

/**
 * A command result as the queue stores it: bytes pass through (copied), any other JSON value becomes its UTF-8 JSON
 * text. A value that is not JSON is INVALID_INPUT at `['result', …]`.
 *
 * @example
 * ```ts
 * encodeResult({ ok: true }); // the bytes of '{"ok":true}'
 * encodeResult(new Uint8Array([1, 2])); // Uint8Array [1, 2]
 * ```
 */
export function encodeResult(result: Json | Uint8Array): Uint8Array {
  if (result instanceof Uint8Array) return Uint8Array.from(result);
  assertJson(result, ['result'], 'INVALID_INPUT');
  return new TextEncoder().encode(JSON.stringify(result));
}

/**
 * Reads a result {@link encodeResult} made from JSON (or any UTF-8 JSON bytes) back; bytes that are not UTF-8 JSON
 * are INVALID_INPUT.
 *
 * @example
 * ```ts
 * const command = await compute.commands.get(compute.database, id);
 * decodeJsonResult(command!.result!); // { ok: true }
 * ```
 */
export function decodeJsonResult(bytes: Uint8Array): Json {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as Json;
  } catch (err) {
    throw new ComputeError('INVALID_INPUT', 'the result is not UTF-8 JSON', {
      details: { path: ['result'] },
      cause: err,
    });
  }
}
