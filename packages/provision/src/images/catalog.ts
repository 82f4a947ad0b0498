import {
  type Clock,
  ComputeError,
  type ErrorPath,
  type ErrorReason,
  isComputeError,
  newId,
  type SqlExecutor,
} from '@better-compute/core';
import { assertStorableText } from '@better-compute/core/checks';
import { systemClock } from '@better-compute/core/kernel';
import { type ImageVerifier, imageVerifier } from '@better-compute/pki';
import { IMAGE_REF_PATTERN } from '../define/define-profile';

/** What registering an image takes. */
export interface RegisterImageInput {
  /** The tenant whose catalog gets the image. */
  tenantId: string;
  /** Lower-case letters, digits and `. _ / -`, starting with a letter or digit: `ubuntu/noble`, `talos`. */
  name: string;
  /** Letters, digits and `. _ + -`: `24.04.1`, `v1.9.2`. */
  version: string;
  /** `sha256:<64 lower-case hex digits>` of the image. */
  digest: string;
  /** The signature over the digest, as the verifier expects it (the default: base64 over `imageSigningBytes`). */
  signature: string;
  /** The signer that made it; by default any signer allowlisted for the tenant may have. */
  signerId?: string;
  /** Where the image can be fetched: an http(s) URL, or another scheme an ImageSource resolves. No credentials. */
  url?: string;
  /** Visible to every tenant (after a tenant's own image of the same name and version). */
  public?: boolean;
}

/** An image of the catalog. */
export interface ImageRecord {
  id: string;
  tenantId: string;
  name: string;
  version: string;
  /** `name@version`. */
  ref: string;
  digest: string;
  url: string | null;
  public: boolean;
  signerId: string;
  signature: string;
  createdAt: Date;
}

const INPUT_FIELDS: ReadonlySet<string> = new Set([
  'tenantId',
  'name',
  'version',
  'digest',
  'signature',
  'signerId',
  'url',
  'public',
]);
const NAME = /^[a-z0-9][a-z0-9._/-]*$/;
const VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]*$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const SCHEME = /^[a-z][a-z0-9+.-]*:$/;
const MAX_REF = 256;
const MAX_SIGNATURE = 16_384;
const MAX_URL = 2048;

function invalid(message: string, path: ErrorPath, reason?: ErrorReason<'INVALID_INPUT'>): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path, ...(reason ? { reason } : {}) } });
}

function text(value: unknown, path: ErrorPath, max: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw invalid(`${path.join('.')} must be a non-empty string of at most ${max} characters`, path);
  }
  // A URL parses with a NUL in it, and every text here is stored or looked up.
  assertStorableText(value, path);
  return value;
}

function checkUrl(value: unknown): string {
  const url = text(value, ['url'], MAX_URL);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('url must be an absolute URL (https://…, or a scheme an image source resolves)', ['url']);
  }
  if (!SCHEME.test(parsed.protocol) || /\s/.test(url)) {
    throw invalid('url must be an absolute URL (https://…, or a scheme an image source resolves)', ['url']);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw invalid('url must not carry credentials; the catalog is readable by every tenant that sees the image', [
      'url',
    ]);
  }
  return url;
}

function checkRegisterInput(input: unknown): RegisterImageInput {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw invalid('registering an image takes an object', []);
  }
  const fields = input as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    if (!INPUT_FIELDS.has(key)) throw invalid(`an image has no field ${JSON.stringify(key)}`, [key]);
  }
  const tenantId = text(fields.tenantId, ['tenantId'], 512);
  const name = text(fields.name, ['name'], MAX_REF);
  if (!NAME.test(name)) {
    throw invalid('name is lower-case letters, digits and . _ / -, starting with a letter or digit', ['name']);
  }
  const version = text(fields.version, ['version'], MAX_REF);
  if (!VERSION.test(version)) {
    throw invalid('version is letters, digits and . _ + -, starting with a letter or digit', ['version']);
  }
  if (name.length + 1 + version.length > MAX_REF) {
    throw invalid(`name@version must be at most ${MAX_REF} characters`, ['version']);
  }
  const digest = text(fields.digest, ['digest'], 71);
  if (!DIGEST.test(digest)) throw invalid('digest must be sha256:<64 lower-case hex digits>', ['digest']);
  const signature = text(fields.signature, ['signature'], MAX_SIGNATURE);
  const signerId = fields.signerId === undefined ? undefined : text(fields.signerId, ['signerId'], 256);
  const url = fields.url === undefined ? undefined : checkUrl(fields.url);
  if (fields.public !== undefined && typeof fields.public !== 'boolean') {
    throw invalid('public must be true or false', ['public']);
  }
  return {
    tenantId,
    name,
    version,
    digest,
    signature,
    ...(signerId !== undefined ? { signerId } : {}),
    ...(url !== undefined ? { url } : {}),
    ...(fields.public === true ? { public: true } : {}),
  };
}

type Row = {
  id: string;
  tenant_id: string;
  name: string;
  version: string;
  digest: string;
  url: string | null;
  public: boolean;
  signer_id: string;
  signature: string;
  created_at: string | Date;
};

function toRecord(row: Row): ImageRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    version: row.version,
    ref: `${row.name}@${row.version}`,
    digest: row.digest,
    url: row.url,
    public: row.public === true,
    signerId: row.signer_id,
    signature: row.signature,
    createdAt: new Date(row.created_at),
  };
}

/** Asks the verifier; its ComputeErrors pass through, anything else it throws is INVALID_INPUT `signature-invalid`. */
async function verify(
  sql: SqlExecutor,
  verifier: ImageVerifier,
  input: { tenantId: string; digest: string; signature: string; signerId?: string },
): Promise<string> {
  let verified: { signerId: string };
  try {
    verified = await verifier(sql, input);
  } catch (error) {
    if (isComputeError(error)) throw error;
    throw new ComputeError('INVALID_INPUT', 'the image signature does not verify', {
      details: { path: ['signature'], reason: 'signature-invalid' },
      cause: error,
    });
  }
  const signerId = (verified as { signerId?: unknown } | undefined)?.signerId;
  if (typeof signerId !== 'string' || signerId.length === 0) {
    throw new ComputeError('INVALID_CONFIG', 'the image verifier must resolve to { signerId } naming the signer', {
      details: { path: ['imageVerifier'] },
    });
  }
  return signerId;
}

/**
 * Registers an image in a tenant's catalog by digest, after `verifier` (pki's `imageVerifier`, the signer allowlist, by
 * default) checked its signature: the verifier's error when it does not check (pki's: PERMISSION_DENIED
 * `signer-unknown` or `signature-invalid`), INVALID_INPUT with `details.path` for malformed input, NOT_FOUND for an
 * unknown tenant, CONFLICT when the tenant already has that `name@version` (an image version is immutable: register a
 * new version). `created_at` comes from `deps.clock`.
 *
 * @example
 * ```ts
 * const image = await db.transaction((tx) =>
 *   registerImage(tx, { tenantId: 'acme', name: 'ubuntu/noble', version: '24.04.1', digest, signature, url }),
 * );
 * ```
 */
export async function registerImage(
  tx: SqlExecutor,
  input: RegisterImageInput,
  verifier: ImageVerifier = imageVerifier,
  deps: { clock?: Clock } = {},
): Promise<ImageRecord> {
  const image = checkRegisterInput(input);
  const tenant = await tx.query('SELECT 1 FROM tenants WHERE id = $1', [image.tenantId]);
  if (tenant.rowCount === 0) {
    throw new ComputeError('NOT_FOUND', `tenant ${image.tenantId} not found`, { details: { path: ['tenantId'] } });
  }
  const signerId = await verify(tx, verifier, {
    tenantId: image.tenantId,
    digest: image.digest,
    signature: image.signature,
    ...(image.signerId !== undefined ? { signerId: image.signerId } : {}),
  });
  const { rows } = await tx.query<Row>(
    `INSERT INTO images (id, tenant_id, name, version, digest, url, public, signer_id, signature, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (tenant_id, name, version) DO NOTHING RETURNING *`,
    [
      newId('img'),
      image.tenantId,
      image.name,
      image.version,
      image.digest,
      image.url ?? null,
      image.public === true,
      signerId,
      image.signature,
      (deps.clock ?? systemClock).now(),
    ],
  );
  const row = rows[0];
  if (!row) {
    throw new ComputeError(
      'CONFLICT',
      `image ${image.name}@${image.version} already exists in tenant ${image.tenantId}`,
      {
        details: { path: ['version'] },
      },
    );
  }
  return toRecord(row);
}

/**
 * Resolves `name@version` for a tenant: the tenant's own image, else a public one (a public image of `root` first, then
 * the earliest registered). NOT_FOUND when neither exists, INVALID_INPUT (path `['ref']`) for a malformed reference.
 * With `verifier`, the stored signature is checked again against the image's own tenant, so an image whose signer was
 * revoked since no longer resolves (the verifier's error).
 *
 * @example
 * ```ts
 * const { url, digest } = await resolveImageRef(tx, node.tenantId, profile.image);
 * ```
 */
export async function resolveImageRef(
  sql: SqlExecutor,
  tenantId: string,
  ref: string,
  options: { verifier?: ImageVerifier } = {},
): Promise<ImageRecord> {
  text(tenantId, ['tenantId'], 512);
  if (typeof ref !== 'string' || ref.length > MAX_REF || !IMAGE_REF_PATTERN.test(ref)) {
    throw invalid(`an image reference is name@version (at most ${MAX_REF} characters), like ubuntu/noble@24.04.1`, [
      'ref',
    ]);
  }
  const at = ref.indexOf('@');
  const { rows } = await sql.query<Row>(
    `SELECT * FROM images WHERE name = $2 AND version = $3 AND (tenant_id = $1 OR public)
     ORDER BY tenant_id = $1 DESC, tenant_id = 'root' DESC, created_at, id LIMIT 1`,
    [tenantId, ref.slice(0, at), ref.slice(at + 1)],
  );
  const row = rows[0];
  if (!row) throw new ComputeError('NOT_FOUND', `image ${ref} not found`, { details: { path: ['ref'] } });
  const image = toRecord(row);
  if (options.verifier) {
    await verify(sql, options.verifier, {
      tenantId: image.tenantId,
      digest: image.digest,
      signature: image.signature,
      signerId: image.signerId,
    });
  }
  return image;
}

/** The image catalog bound to the provision module's verifier and clock (`provision.images`). */
export interface ImageCatalog {
  /** {@link registerImage} with the module's `imageVerifier` and the kernel's clock. */
  register(tx: SqlExecutor, input: RegisterImageInput): Promise<ImageRecord>;
  /** {@link resolveImageRef}, checking the signature again with the module's `imageVerifier`. */
  resolve(sql: SqlExecutor, tenantId: string, ref: string): Promise<ImageRecord>;
}

/**
 * Binds the catalog functions to a verifier and a clock (the system clock while `clock()` gives none).
 *
 * @example
 * ```ts
 * const images = imageCatalog(imageVerifier, () => ctx.clock);
 * await images.register(tx, input);
 * ```
 */
export function imageCatalog(verifier: ImageVerifier, clock: () => Clock | undefined): ImageCatalog {
  return Object.freeze({
    register: (tx: SqlExecutor, input: RegisterImageInput) => {
      const now = clock();
      return registerImage(tx, input, verifier, now ? { clock: now } : {});
    },
    resolve: (sql: SqlExecutor, tenantId: string, ref: string) => resolveImageRef(sql, tenantId, ref, { verifier }),
  });
}
