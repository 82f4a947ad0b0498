import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey } from 'node:crypto';
import type { ErrorPath } from '@better-compute/core';
import { p256 } from '@noble/curves/nist.js';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { fromBase64, toBase64Url } from './encoding';
import {
  type PrivateKeyInput,
  type PublicKeyInfo,
  type PublicKeyInput,
  parsePrivateKey,
  parsePublicKey,
  type SignatureAlgorithm,
} from './keys';

// @noble/ed25519 ships without a synchronous SHA-512; give it noble's.
ed.hashes.sha512 = sha512;

/**
 * Signs bytes: Ed25519 (64 bytes), or ECDSA P-256 over SHA-256 as a 64-byte `r || s` (low-S).
 *
 * @example
 * ```ts
 * const signature = signBytes(privateKeyPem, canonicalBytes({ hello: 'world' }));
 * ```
 */
export function signBytes(
  privateKey: PrivateKeyInput,
  bytes: Uint8Array,
  path: ErrorPath = ['privateKey'],
): Uint8Array {
  const key = parsePrivateKey(privateKey, path);
  if (key.alg === 'ed25519') return ed.sign(bytes, key.secret);
  return p256.sign(bytes, key.secret, { prehash: true, lowS: true, format: 'compact' });
}

/**
 * {@link signBytes} with the signature as unpadded base64url, the form signatures travel in.
 *
 * @example
 * ```ts
 * const signature = signToBase64Url(approverKeyPem, batchSigningBytes(batch));
 * ```
 */
export function signToBase64Url(privateKey: PrivateKeyInput, bytes: Uint8Array, path?: ErrorPath): string {
  return toBase64Url(signBytes(privateKey, bytes, path));
}

/**
 * Whether `signature` is a valid signature of `bytes` under `publicKey`. ECDSA accepts `r || s` (64 bytes) or DER,
 * and high-S values, because Go's `crypto/ecdsa` writes both. A malformed key is INVALID_INPUT at `path`; a signature
 * of the wrong shape is simply not valid.
 *
 * @example
 * ```ts
 * verifyBytes(publicJwk, bytes, signature); // true or false
 * ```
 */
export function verifyBytes(
  publicKey: PublicKeyInput | PublicKeyInfo,
  bytes: Uint8Array,
  signature: Uint8Array,
  path: ErrorPath = ['publicKey'],
): boolean {
  const key = isInfo(publicKey) ? publicKey : parsePublicKey(publicKey, path);
  try {
    if (key.alg === 'ed25519') return signature.length === 64 && ed.verify(signature, bytes, key.raw);
    const format = signature.length === 64 ? 'compact' : 'der';
    return p256.verify(signature, bytes, key.raw, { prehash: true, lowS: false, format });
  } catch {
    return false;
  }
}

/**
 * {@link verifyBytes} with the signature as base64 or base64url text; text that is not base64 is INVALID_INPUT at
 * `signaturePath`.
 *
 * @example
 * ```ts
 * verifyBase64(signerPem, imageSigningBytes(digest), signature, ['signature']);
 * ```
 */
export function verifyBase64(
  publicKey: PublicKeyInput | PublicKeyInfo,
  bytes: Uint8Array,
  signature: unknown,
  signaturePath: ErrorPath = ['signature'],
): boolean {
  return verifyBytes(publicKey, bytes, fromBase64(signature, signaturePath));
}

function isInfo(value: unknown): value is PublicKeyInfo {
  return typeof value === 'object' && value !== null && 'raw' in value && 'alg' in value && 'spkiPem' in value;
}

/** A fresh signing key pair, as PEM (PKCS#8 / SPKI) and JWK. */
export interface SigningKeyPair {
  alg: SignatureAlgorithm;
  privateKeyPem: string;
  publicKeyPem: string;
  privateJwk: JsonWebKey;
  publicJwk: JsonWebKey;
}

/**
 * Makes a signing key pair, for approvers, image signers and tests.
 *
 * @example
 * ```ts
 * const approver = generateSigningKeyPair('ed25519');
 * ```
 */
export function generateSigningKeyPair(alg: SignatureAlgorithm = 'ed25519'): SigningKeyPair {
  // The key generation encodes the PEMs itself and the JWKs come from keys made anew from them. Exporting a generated
  // KeyObject directly can deadlock Node 20 (seen as a test process frozen in a futex): a garbage collection inside
  // the export destroys the generation job, whose destructor takes the key's lock the export already holds.
  const publicKeyEncoding = { type: 'spki', format: 'pem' } as const;
  const privateKeyEncoding = { type: 'pkcs8', format: 'pem' } as const;
  const pair =
    alg === 'ed25519'
      ? generateKeyPairSync('ed25519', { publicKeyEncoding, privateKeyEncoding })
      : generateKeyPairSync('ec', { namedCurve: 'P-256', publicKeyEncoding, privateKeyEncoding });
  return {
    alg,
    privateKeyPem: pair.privateKey,
    publicKeyPem: pair.publicKey,
    privateJwk: createPrivateKey(pair.privateKey).export({ format: 'jwk' }) as JsonWebKey,
    publicJwk: createPublicKey(pair.publicKey).export({ format: 'jwk' }) as JsonWebKey,
  };
}
