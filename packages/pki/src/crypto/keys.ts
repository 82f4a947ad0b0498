import { createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { ComputeError, type ErrorPath } from '@better-compute/core';
import { fromBase64 } from './encoding';

/** The two signature algorithms: Ed25519, and ECDSA on P-256 over SHA-256 (`es256`). */
export type SignatureAlgorithm = 'ed25519' | 'es256';

/** A public key in a form this package accepts: a JWK (OKP Ed25519 or EC P-256) or an SPKI PEM. */
export type PublicKeyInput = string | JsonWebKey;

/** A private key: a JWK with `d`, or a PKCS#8 PEM. */
export type PrivateKeyInput = string | JsonWebKey;

/** A parsed public key: the algorithm, its raw bytes (32 for Ed25519, 65 uncompressed for P-256) and an SPKI PEM. */
export interface PublicKeyInfo {
  alg: SignatureAlgorithm;
  raw: Uint8Array;
  spkiPem: string;
  jwk: JsonWebKey;
}

/** A parsed private key: the algorithm and its 32-byte scalar or seed. */
export interface PrivateKeyInfo {
  alg: SignatureAlgorithm;
  secret: Uint8Array;
  publicKey: PublicKeyInfo;
}

function bad(path: ErrorPath, message: string, cause?: unknown): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path, reason: 'malformed-key' }, cause });
}

function toKeyObject(input: unknown, path: ErrorPath, kind: 'public' | 'private'): KeyObject {
  try {
    if (typeof input === 'string') {
      if (!input.includes('-----BEGIN')) throw bad(path, `a ${kind} key must be a PEM block or a JWK`);
      return kind === 'public'
        ? createPublicKey({ key: input, format: 'pem' })
        : createPrivateKey({ key: input, format: 'pem' });
    }
    if (input === null || typeof input !== 'object' || Array.isArray(input)) {
      throw bad(path, `a ${kind} key must be a PEM block or a JWK`);
    }
    const jwk = input as JsonWebKey;
    if (kind === 'public') {
      const { d: _private, ...publicPart } = jwk;
      return createPublicKey({ key: publicPart, format: 'jwk' });
    }
    return createPrivateKey({ key: jwk, format: 'jwk' });
  } catch (cause) {
    if (cause instanceof ComputeError) throw cause;
    // Node's message may quote the input; it is a key, so it is not copied.
    throw bad(path, `not a readable ${kind} key`, cause);
  }
}

function describe(key: KeyObject, path: ErrorPath): PublicKeyInfo {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  const jwk = publicKey.export({ format: 'jwk' });
  const spkiPem = publicKey.export({ format: 'pem', type: 'spki' }).toString();
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519' && jwk.x) {
    return { alg: 'ed25519', raw: fromBase64(jwk.x, path), spkiPem, jwk: { kty: 'OKP', crv: 'Ed25519', x: jwk.x } };
  }
  if (jwk.kty === 'EC' && jwk.crv === 'P-256' && jwk.x && jwk.y) {
    const raw = new Uint8Array(65);
    raw[0] = 4;
    raw.set(fromBase64(jwk.x, path), 1);
    raw.set(fromBase64(jwk.y, path), 33);
    return { alg: 'es256', raw, spkiPem, jwk: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y } };
  }
  throw bad(path, 'only Ed25519 and ECDSA P-256 keys are accepted');
}

/**
 * Reads a public key (JWK or SPKI PEM; a private JWK or PKCS#8 PEM is refused) into its algorithm and raw bytes.
 * Malformed or unsupported keys are INVALID_INPUT at `path`.
 *
 * @example
 * ```ts
 * const key = parsePublicKey({ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' });
 * key.alg; // 'ed25519'
 * ```
 */
export function parsePublicKey(input: unknown, path: ErrorPath = ['publicKey']): PublicKeyInfo {
  if (typeof input === 'string' && /PRIVATE KEY/.test(input))
    throw bad(path, 'expected a public key, got a private key');
  return describe(toKeyObject(input, path, 'public'), path);
}

/**
 * Reads a private key (JWK with `d`, or PKCS#8 PEM) into its algorithm and secret bytes.
 *
 * @example
 * ```ts
 * const { alg, secret } = parsePrivateKey(pkcs8Pem);
 * ```
 */
export function parsePrivateKey(input: unknown, path: ErrorPath = ['privateKey']): PrivateKeyInfo {
  const key = toKeyObject(input, path, 'private');
  const publicKey = describe(key, path);
  const jwk = key.export({ format: 'jwk' });
  if (!jwk.d) throw bad(path, 'the private key has no private part');
  return { alg: publicKey.alg, secret: fromBase64(jwk.d, path), publicKey };
}
