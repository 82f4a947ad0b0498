import { randomBytes } from 'node:crypto';
import { generateSigningKeyPair, type Pki, type PkiOptions, pki } from '../../src';
import {
  type FakeClock,
  fakeClock,
  migrateAndSeed,
  type RecordingLogger,
  recordingLogger,
  type Scratch,
} from './database';

/** One test file's database, fake clock, recording logger and pki, plus the plaintexts it must never store. */
export interface Harness {
  scratch: Scratch;
  clock: FakeClock;
  log: RecordingLogger;
  key: Uint8Array;
  pki: Pki;
  /** Every token and secret value the file made: none may appear in a table or a log line. */
  plaintexts: string[];
}

/** Migrates and seeds a scratch database and builds a pki on it. */
export async function createHarness(scratch: Scratch, options: Partial<PkiOptions> = {}): Promise<Harness> {
  const clock = fakeClock();
  const log = recordingLogger();
  await migrateAndSeed(scratch.db, clock);
  const key = new Uint8Array(randomBytes(32));
  const plaintexts: string[] = [];
  return { scratch, clock, log, key, plaintexts, pki: pki({ key, clock, log, ...options }) };
}

/** Issues a join token through the harness and remembers its plaintext (whole and secret part). */
export async function issueTracked(
  h: Harness,
  input: Parameters<Pki['issueJoinToken']>[1],
): Promise<{ id: string; token: string }> {
  const issued = await h.scratch.db.transaction((tx) => h.pki.issueJoinToken(tx, input));
  h.plaintexts.push(issued.token, issued.token.split('.')[1] ?? issued.token);
  return issued;
}

/** Joins a new discovery agent of tenant `acme` at `site_acme` through pki directly (a token, then the join). */
export async function joinNewAgent(h: Harness) {
  const { token } = await issueTracked(h, {
    tenantId: 'acme',
    role: 'discovery',
    siteId: 'site_acme',
    ttlSeconds: 600,
  });
  const key = generateSigningKeyPair('es256');
  return h.scratch.db.transaction((tx) => h.pki.joinAgent(tx, { token, publicKey: key.publicJwk }));
}
