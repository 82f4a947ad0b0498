import {
  ComputeError,
  defineApiGroup,
  defineApiMethod,
  type ModuleContext,
  ROOT_TENANT_ID,
  resolveTenantResource,
} from '@better-compute/core';
import { type ImageVerifier, imageVerifier } from '@better-compute/pki';
import * as v from 'valibot';
import { type ImageRecord, registerImage, resolveImageRef } from '../images/catalog';
import { cursorSchema, decodeCursor, encodeCursor, limitSchema, type Page } from './pages';
import { textSchema } from './schemas';

/** An image as `images.register` and `images.get` answer it (`createdAt` as ISO 8601). */
export interface ApiImage {
  id: string;
  /** The tenant whose catalog holds it (`root` for the operator's catalog). */
  tenantId: string;
  name: string;
  version: string;
  /** `name@version`, what a profile's `image` names. */
  ref: string;
  digest: string;
  url: string | null;
  public: boolean;
  signerId: string;
  signature: string;
  createdAt: string;
}

/** One entry of `images.list`: an image without its signature. */
export type ApiImageSummary = Omit<ApiImage, 'signature'>;

const IMAGES_LISTING = 'images';

const onTenant = (input: { tenantId: string }, ctx: ModuleContext) => resolveTenantResource(ctx.sql, input.tenantId);

function toApiImage(image: ImageRecord): ApiImage {
  return {
    id: image.id,
    tenantId: image.tenantId,
    name: image.name,
    version: image.version,
    ref: image.ref,
    digest: image.digest,
    url: image.url,
    public: image.public,
    signerId: image.signerId,
    signature: image.signature,
    createdAt: image.createdAt.toISOString(),
  };
}

// The image each name@version resolves to for the tenant, exactly as resolveImageRef picks it (the tenant's own, else a
// public one of root, else the earliest public one), newest first.
const LIST_IMAGES = `
SELECT i.*, to_char(i.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key FROM (
  SELECT DISTINCT ON (name, version) id, tenant_id, name, version, digest, url, public, signer_id, created_at
  FROM images WHERE (tenant_id = $1 OR public) AND ($2::text IS NULL OR name = $2)
  ORDER BY name, version, tenant_id = $1 DESC, tenant_id = 'root' DESC, created_at, id
) i
WHERE $3::timestamptz IS NULL OR (i.created_at, i.id) < ($3::timestamptz, $4::text)
ORDER BY i.created_at DESC, i.id DESC
LIMIT $5`;

type ListRow = {
  id: string;
  tenant_id: string;
  name: string;
  version: string;
  digest: string;
  url: string | null;
  public: boolean;
  signer_id: string;
  created_at: Date;
  created_key: string;
};

/**
 * The `images` API group (the image catalog, steps-and-profiles.md "Images"): `register` (`compute:images:manage`)
 * registers an image by digest in the tenant's catalog after `verifier` checked its signature (its errors keep their
 * codes: PERMISSION_DENIED `signer-unknown` / `signature-invalid` from pki's allowlist; CONFLICT for a `name@version`
 * the tenant has); only a root credential may register a public image. `list` and `get` (`compute:images:read`) show
 * what the tenant's profiles resolve: its own images, else public ones (root's first). Every method is decided on the
 * tenant (`compute-tenant`); another tenant's private image is NOT_FOUND.
 *
 * @example
 * ```ts
 * await compute.api.images.register(token, { tenantId: 'root', name: 'ubuntu/noble', version: '24.04.1', digest, signature, url, public: true });
 * const { items } = await compute.api.images.list(token, { tenantId: 'acme' });
 * ```
 */
export function imagesApi(verifier: ImageVerifier = imageVerifier) {
  const register = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      name: textSchema('name'),
      version: textSchema('version'),
      digest: textSchema('digest'),
      signature: v.pipe(
        v.string('signature must be a string'),
        v.minLength(1, 'signature must not be empty'),
        v.maxLength(16_384, 'signature must be at most 16384 characters'),
      ),
      signerId: v.optional(textSchema('signerId')),
      url: v.optional(
        v.pipe(
          v.string('url must be a string'),
          v.minLength(1, 'url must not be empty'),
          v.maxLength(2048, 'url must be at most 2048 characters'),
        ),
      ),
      public: v.optional(v.boolean('public must be a boolean')),
    }),
    permission: 'compute:images:manage',
    resource: onTenant,
    description:
      "Registers an image by digest in the tenant's catalog once its signature verifies against the allowlisted " +
      'signers; name@version is immutable (CONFLICT). Only root credentials may register a public image.',
    handler: async (input, ctx): Promise<ApiImage> => {
      if (input.public === true && ctx.principal.tenantId !== ROOT_TENANT_ID) {
        throw new ComputeError('PERMISSION_DENIED', 'only a root credential may register a public image', {
          details: { path: ['public'], reason: 'public-requires-root', permission: 'compute:images:manage' },
        });
      }
      const image = await ctx.sql.transaction(async (tx) => {
        const registered = await registerImage(
          tx,
          {
            tenantId: input.tenantId,
            name: input.name,
            version: input.version,
            digest: input.digest,
            signature: input.signature,
            ...(input.signerId === undefined ? {} : { signerId: input.signerId }),
            ...(input.url === undefined ? {} : { url: input.url }),
            ...(input.public === true ? { public: true } : {}),
          },
          verifier,
          { clock: ctx.clock },
        );
        await ctx.events.publish(tx, {
          tenantId: input.tenantId,
          subject: `image/${registered.id}`,
          type: 'provision.image.registered',
          data: {
            imageId: registered.id,
            ref: registered.ref,
            digest: registered.digest,
            public: registered.public,
            signerId: registered.signerId,
          },
        });
        return registered;
      });
      return toApiImage(image);
    },
  });

  const list = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      name: v.optional(textSchema('name')),
      limit: limitSchema,
      cursor: cursorSchema,
    }),
    permission: 'compute:images:read',
    resource: onTenant,
    description:
      'The images the tenant can use, one per name@version as a profile resolves it (its own, else a public one, ' +
      "root's first), newest first; `nextCursor` fetches the next page.",
    handler: async (input, ctx): Promise<Page<ApiImageSummary>> => {
      const after =
        input.cursor === undefined
          ? undefined
          : (decodeCursor(input.cursor, IMAGES_LISTING, ['t', 's']) as [string, string]);
      const { rows } = await ctx.sql.query<ListRow>(LIST_IMAGES, [
        input.tenantId,
        input.name ?? null,
        after?.[0] ?? null,
        after?.[1] ?? null,
        input.limit + 1,
      ]);
      const page = rows.slice(0, input.limit);
      const last = page.at(-1);
      return {
        items: page.map((row) => ({
          id: row.id,
          tenantId: row.tenant_id,
          name: row.name,
          version: row.version,
          ref: `${row.name}@${row.version}`,
          digest: row.digest,
          url: row.url,
          public: row.public === true,
          signerId: row.signer_id,
          createdAt: new Date(row.created_at).toISOString(),
        })),
        nextCursor:
          rows.length > input.limit && last ? encodeCursor(IMAGES_LISTING, [last.created_key, last.id]) : null,
      };
    },
  });

  const get = defineApiMethod({
    input: v.object({ tenantId: textSchema('tenantId'), ref: textSchema('ref') }),
    permission: 'compute:images:read',
    resource: onTenant,
    description:
      'The image name@version resolves to for the tenant (its own, else a public one, root’s first), with its ' +
      'signature; NOT_FOUND at ref when there is none.',
    handler: async (input, ctx): Promise<ApiImage> =>
      toApiImage(await resolveImageRef(ctx.sql, input.tenantId, input.ref)),
  });

  return defineApiGroup('images', { register, list, get });
}

/** The `images` group {@link imagesApi} returns. */
export type ImagesApi = ReturnType<typeof imagesApi>;
