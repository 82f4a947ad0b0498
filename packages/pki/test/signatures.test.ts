import { createPrivateKey, sign as nodeSign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateSigningKeyPair, parsePrivateKey, parsePublicKey, signBytes, verifyBase64, verifyBytes } from '../src';
import { computeErrorOf } from './support/errors';

const message = new TextEncoder().encode('{"hello":"world"}');

describe.each(['ed25519', 'es256'] as const)('%s signatures', (alg) => {
  const pair = generateSigningKeyPair(alg);

  it('verify with the public key as JWK and as SPKI PEM', () => {
    const signature = signBytes(pair.privateKeyPem, message);
    expect(verifyBytes(pair.publicJwk, message, signature)).toBe(true);
    expect(verifyBytes(pair.publicKeyPem, message, signature)).toBe(true);
  });

  it('sign with the private key as JWK as well as PKCS#8 PEM', () => {
    expect(verifyBytes(pair.publicKeyPem, message, signBytes(pair.privateJwk, message))).toBe(true);
  });

  it('fail on a tampered message, a tampered signature and another key', () => {
    const signature = signBytes(pair.privateKeyPem, message);
    const tampered = new Uint8Array(message);
    tampered[3] = (tampered[3] ?? 0) ^ 1;
    expect(verifyBytes(pair.publicKeyPem, tampered, signature)).toBe(false);
    const badSignature = new Uint8Array(signature);
    badSignature[10] = (badSignature[10] ?? 0) ^ 1;
    expect(verifyBytes(pair.publicKeyPem, message, badSignature)).toBe(false);
    expect(verifyBytes(generateSigningKeyPair(alg).publicKeyPem, message, signature)).toBe(false);
  });

  it('treat a signature of the wrong length as invalid, not as a crash', () => {
    expect(verifyBytes(pair.publicKeyPem, message, new Uint8Array(3))).toBe(false);
  });

  it('verify signatures made by a standard library (node:crypto, as Go writes them)', () => {
    const key = createPrivateKey(pair.privateKeyPem);
    // node writes Ed25519 raw and ECDSA as DER, possibly high-S, like Go's crypto/ecdsa.SignASN1.
    const signature = alg === 'ed25519' ? nodeSign(null, message, key) : nodeSign('sha256', message, key);
    expect(verifyBytes(pair.publicJwk, message, new Uint8Array(signature))).toBe(true);
  });

  it('reports the algorithm of parsed keys', () => {
    expect(parsePublicKey(pair.publicKeyPem).alg).toBe(alg);
    expect(parsePrivateKey(pair.privateKeyPem).alg).toBe(alg);
  });
});

describe('malformed keys and signatures', () => {
  it.each([
    ['a string that is not PEM', 'not a key'],
    ['a broken PEM', '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n'],
    ['a JWK with a bad x', { kty: 'OKP', crv: 'Ed25519', x: '!!' }],
    ['an RSA-less unknown kty', { kty: 'oct', k: 'AAAA' }],
    ['a number', 42],
    ['null', null],
  ])('refuses %s as a public key with INVALID_INPUT at the path', async (_name, input) => {
    const error = await computeErrorOf(() => parsePublicKey(input, ['approvers', 0, 'publicKey']), 'INVALID_INPUT');
    expect(error.details.path).toEqual(['approvers', 0, 'publicKey']);
  });

  it('refuses a private key where a public key is expected', async () => {
    const error = await computeErrorOf(() => parsePublicKey(generateSigningKeyPair().privateKeyPem), 'INVALID_INPUT');
    expect(error.details.path).toEqual(['publicKey']);
  });

  it('refuses an RSA key as unsupported', async () => {
    const { generateKeyPairSync } = await import('node:crypto');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 })
      .publicKey.export({ format: 'pem', type: 'spki' })
      .toString();
    await computeErrorOf(() => parsePublicKey(rsa), 'INVALID_INPUT');
  });

  it('refuses a signature that is not base64 with INVALID_INPUT at its path', async () => {
    const pair = generateSigningKeyPair();
    const error = await computeErrorOf(
      () => verifyBase64(pair.publicKeyPem, message, 'not base64!', ['approval', 'signature']),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['approval', 'signature']);
  });

  it('does not echo a malformed private key in the error message', async () => {
    const secretish = '-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXNlY3JldC1zZWNyZXQ=\n-----END PRIVATE KEY-----\n';
    const error = await computeErrorOf(() => parsePrivateKey(secretish), 'INVALID_INPUT');
    expect(error.message).not.toContain('c2VjcmV0');
  });
});
