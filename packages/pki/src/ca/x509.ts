import 'reflect-metadata';
import { webcrypto } from 'node:crypto';

type CryptoKey = webcrypto.CryptoKey;

import * as x509 from '@peculiar/x509';
import type { PublicKeyInfo } from '../crypto/keys';

// @peculiar/x509 builds and checks certificates through a WebCrypto; Node's is the one we trust.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export { x509 };
export const subtle = webcrypto.subtle;

/** A WebCrypto key (Node's). */
export type { CryptoKey };

/** The CA's key algorithm: ECDSA P-256 (the default, the widest TLS support) or Ed25519. */
export type CaAlgorithm = 'ecdsa-p256' | 'ed25519';

/** WebCrypto parameters of a key algorithm: for import and generation, and for signing. */
export function webCryptoParams(alg: 'ed25519' | 'es256' | CaAlgorithm): {
  key: webcrypto.EcKeyImportParams | { name: 'Ed25519' };
  signing: webcrypto.EcdsaParams | { name: 'Ed25519' };
} {
  if (alg === 'ed25519') return { key: { name: 'Ed25519' }, signing: { name: 'Ed25519' } };
  return { key: { name: 'ECDSA', namedCurve: 'P-256' }, signing: { name: 'ECDSA', hash: 'SHA-256' } };
}

/** Imports a parsed public key as a WebCrypto key, for a certificate's subject public key. */
export async function importPublicKey(key: PublicKeyInfo): Promise<CryptoKey> {
  const der = new Uint8Array(Buffer.from(key.spkiPem.replace(/-----[^-]+-----|\s/g, ''), 'base64'));
  return subtle.importKey('spki', der, webCryptoParams(key.alg).key, true, ['verify']);
}

/** A positive 128-bit serial as lower-case hex; the first byte is never zero, so no encoder strips it. */
export function randomSerial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = ((bytes[0] ?? 1) % 0x7f) + 1;
  return Buffer.from(bytes).toString('hex');
}
