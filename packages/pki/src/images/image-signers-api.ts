import {
  ComputeError,
  defineApiGroup,
  defineApiMethod,
  field,
  type ModuleContext,
  manifest,
  type ResourceRef,
  ROOT_TENANT_ID,
  resolveTenantResource,
  resourceNotFound,
  type SqlExecutor,
} from '@better-compute/core';
import { storableTextProblem } from '@better-compute/core/checks';
import { addImageSigner, revokeImageSigner } from './image-signers';

/** The resource type of an image signer, the one `imageSigners.revoke` is decided on. */
export const COMPUTE_IMAGE_SIGNER = 'compute-image-signer';

/** An allowlisted image signer as the `imageSigners` group answers it. */
export interface ApiImageSigner {
  id: string;
  /** The tenant that allowlisted it; `null` for a signer every tenant trusts that no tenant owns. */
  tenantId: string | null;
  name: string;
  /** `ed25519` or `p256`. */
  algorithm: string;
  /** Trusted by every tenant. */
  public: boolean;
  publicKeyPem: string;
  createdAt: string;
  revokedAt: string | null;
}

/** A page of `imageSigners.list`, newest first: pass `nextCursor` back as `cursor`; `null` on the last page. */
export interface ImageSignersPage {
  items: ApiImageSigner[];
  nextCursor: string | null;
}

const LISTING = 'image-signers';
const CREATED_KEY = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

interface SignerRow {
  id: string;
  tenant_id: string | null;
  name: string;
  algorithm: string;
  public: boolean;
  public_key_pem: string;
  created_at: Date;
  revoked_at: Date | null;
  created_key: string;
}

const COLUMNS = `id, tenant_id, name, algorithm, public, public_key_pem, created_at, revoked_at,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key`;

function toApiSigner(row: SignerRow): ApiImageSigner {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    algorithm: row.algorithm,
    public: row.public === true,
    publicKeyPem: row.public_key_pem,
    createdAt: new Date(row.created_at).toISOString(),
    revokedAt: row.revoked_at ? new Date(row.revoked_at).toISOString() : null,
  };
}

function invalidCursor(): ComputeError {
  return new ComputeError('INVALID_INPUT', 'cursor is not a cursor imageSigners.list returned', {
    details: { path: ['cursor'], reason: 'invalid-cursor' },
  });
}

function encodeCursor(row: SignerRow): string {
  return Buffer.from(JSON.stringify({ l: LISTING, t: row.created_key, i: row.id }), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): { createdKey: string; id: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidCursor();
  const { l, t, i } = parsed as Record<string, unknown>;
  if (l !== LISTING || typeof t !== 'string' || !CREATED_KEY.test(t) || t.startsWith('0000')) throw invalidCursor();
  const millis = `${t.slice(0, 23)}Z`;
  // A date that does not exist rolls over in JavaScript: only one that reads back unchanged can reach the column.
  if (safeIso(millis) !== millis) throw invalidCursor();
  if (typeof i !== 'string' || i.length === 0 || i.length > 512 || storableTextProblem(i) !== undefined) {
    throw invalidCursor();
  }
  return { createdKey: t, id: i };
}

function safeIso(millis: string): string | undefined {
  const at = new Date(millis);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/**
 * Resolves `{ tenantId, signerId }` to the signer's {@link ResourceRef}: a signer the tenant allowlisted (a signer no
 * tenant owns counts as root's). Any other, trusted by the tenant or not, is NOT_FOUND at `['signerId']`.
 */
async function resolveSignerResource(sql: SqlExecutor, tenantId: string, signerId: string): Promise<ResourceRef> {
  const path = ['signerId'];
  const { rowCount } = await sql.query(
    `SELECT 1 FROM pki_image_signers WHERE id = $1 AND COALESCE(tenant_id, '${ROOT_TENANT_ID}') = $2`,
    [signerId, tenantId],
  );
  if (rowCount === 0) throw resourceNotFound(COMPUTE_IMAGE_SIGNER, path);
  return { type: COMPUTE_IMAGE_SIGNER, tenantId, id: signerId, path };
}

const text = (max: number) => field.string({ minLength: 1, maxLength: max });
const onTenant = (input: { tenantId: string }, ctx: ModuleContext) => resolveTenantResource(ctx.sql, input.tenantId);

/**
 * The `imageSigners` API group of the pki module: the allowlist `images.register` verifies signatures against.
 * `add` (`compute:image-signers:manage`, decided on the tenant) allowlists an Ed25519 or ECDSA P-256 public key (JWK or
 * SPKI PEM) for the tenant; only a root credential may add a public signer (trusted by every tenant). `list`
 * (`compute:image-signers:read`) shows the signers the tenant's images verify against (its own and public ones), newest
 * first, revoked ones with `revokedAt`. `revoke` (`compute:image-signers:manage`, decided on a signer of the tenant)
 * removes it from the allowlist: images it signed no longer resolve.
 *
 * @example
 * ```ts
 * const signer = await compute.api.imageSigners.add(token, { tenantId: 'root', name: 'release', publicKey: pem, public: true });
 * ```
 */
export function imageSignersApi() {
  const add = defineApiMethod({
    input: manifest({
      tenantId: text(512),
      name: text(200),
      publicKey: field.json(),
      public: field.boolean().optional(),
    }),
    permission: 'compute:image-signers:manage',
    resource: onTenant,
    description:
      "Allowlists an image signer's public key (Ed25519 or ECDSA P-256, JWK or SPKI PEM) for the tenant; only root " +
      'credentials may add a public signer, trusted by every tenant.',
    handler: async (input, ctx): Promise<ApiImageSigner> => {
      if (input.public === true && ctx.principal.tenantId !== ROOT_TENANT_ID) {
        throw new ComputeError('PERMISSION_DENIED', 'only a root credential may add a public image signer', {
          details: { path: ['public'], reason: 'public-requires-root', permission: 'compute:image-signers:manage' },
        });
      }
      return ctx.sql.transaction(async (tx) => {
        const { id } = await addImageSigner(
          tx,
          {
            tenantId: input.tenantId,
            name: input.name,
            publicKey: input.publicKey,
            ...(input.public === undefined ? {} : { public: input.public }),
          },
          { clock: ctx.clock },
        );
        const { rows } = await tx.query<SignerRow>(`SELECT ${COLUMNS} FROM pki_image_signers WHERE id = $1`, [id]);
        const signer = toApiSigner(rows[0] as SignerRow);
        await ctx.events.publish(tx, {
          tenantId: input.tenantId,
          subject: `image-signer/${id}`,
          type: 'pki.imageSigner.added',
          data: { signerId: id, name: signer.name, algorithm: signer.algorithm, public: signer.public },
        });
        return signer;
      });
    },
  });

  const list = defineApiMethod({
    input: manifest({
      tenantId: text(512),
      limit: field.int({ min: 1, max: 100 }).default(20),
      cursor: text(2048).optional(),
    }),
    permission: 'compute:image-signers:read',
    resource: onTenant,
    description:
      "The image signers the tenant's images verify against (its own and public ones), newest first, revoked ones " +
      'with revokedAt; nextCursor fetches the next page.',
    handler: async (input, ctx): Promise<ImageSignersPage> => {
      const after = input.cursor === undefined ? undefined : decodeCursor(input.cursor);
      const { rows } = await ctx.sql.query<SignerRow>(
        `SELECT ${COLUMNS} FROM pki_image_signers
         WHERE (tenant_id = $1 OR tenant_id IS NULL OR public)
           AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::text))
         ORDER BY created_at DESC, id DESC LIMIT $4`,
        [input.tenantId, after?.createdKey ?? null, after?.id ?? null, input.limit + 1],
      );
      const page = rows.slice(0, input.limit);
      const last = page.at(-1);
      return {
        items: page.map(toApiSigner),
        nextCursor: rows.length > input.limit && last ? encodeCursor(last) : null,
      };
    },
  });

  const revoke = defineApiMethod({
    input: manifest({ tenantId: text(512), signerId: text(512) }),
    permission: 'compute:image-signers:manage',
    resource: (input, ctx) => resolveSignerResource(ctx.sql, input.tenantId, input.signerId),
    description:
      'Removes an image signer of the tenant from the allowlist: images it signed no longer verify or resolve. ' +
      'Revoking again keeps the first time.',
    handler: async (input, ctx): Promise<ApiImageSigner> =>
      ctx.sql.transaction(async (tx) => {
        await revokeImageSigner(tx, input.signerId, { clock: ctx.clock });
        const { rows } = await tx.query<SignerRow>(`SELECT ${COLUMNS} FROM pki_image_signers WHERE id = $1`, [
          input.signerId,
        ]);
        const signer = toApiSigner(rows[0] as SignerRow);
        await ctx.events.publish(tx, {
          tenantId: input.tenantId,
          subject: `image-signer/${input.signerId}`,
          type: 'pki.imageSigner.revoked',
          data: { signerId: input.signerId, revokedAt: signer.revokedAt },
        });
        return signer;
      }),
  });

  return defineApiGroup('imageSigners', { add, list, revoke });
}

/** The `imageSigners` group {@link imageSignersApi} returns. */
export type ImageSignersApi = ReturnType<typeof imageSignersApi>;
