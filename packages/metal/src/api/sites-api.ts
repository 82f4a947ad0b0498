import { ComputeError, defineApiGroup, defineApiMethod, newId, resolveTenantResource } from '@better-compute/core';
import * as v from 'valibot';
import { checkStorable, textSchema } from './inputs';
import { resolveSiteResource } from './metal-api';

/** A site as `sites.create` returns it. */
export interface SiteView {
  id: string;
  tenantId: string;
  name: string;
  createdAt: string;
}

/** A site agent's join token, as `sites.joinToken` returns it once. */
export interface SiteJoinToken {
  /** The token's id (`tok_…`): what revoking it or an audit names. */
  tokenId: string;
  /** The secret itself: shown once, stored only hashed, never logged. */
  token: string;
  siteId: string;
  expiresAt: string;
  maxUses: number;
}

/** How long a site join token lives by default, and at most. */
export const SITE_TOKEN_TTL = Object.freeze({ defaultSeconds: 3_600, maxSeconds: 7 * 24 * 3_600 });

/**
 * The `sites` API group: `create` (a site of a tenant, decided on the tenant) and `joinToken` (a join token a site
 * agent of that site joins with, role `site`, decided on the site through `ctx.pki`; INVALID_CONFIG without pki). Both
 * need `compute:sites:manage`. The token is returned once and nowhere stored in clear or logged.
 *
 * @example
 * ```ts
 * const site = await api.sites.create(token, { tenantId: 'acme', name: 'fra1' });
 * const { token: joinToken } = await api.sites.joinToken(token, { tenantId: 'acme', siteId: site.id });
 * ```
 */
export function sitesApi() {
  const create = defineApiMethod({
    input: v.object({ tenantId: textSchema('tenantId'), name: textSchema('name', 128) }),
    permission: 'compute:sites:manage',
    resource: (input, ctx) => resolveTenantResource(ctx.sql, input.tenantId),
    description: 'Creates a site (a room of machines served by its site agents); a name the tenant uses is CONFLICT.',
    handler: async (input, ctx): Promise<SiteView> => {
      checkStorable(input.name, ['name']);
      return ctx.sql.transaction(async (tx) => {
        // Serialises creates in one tenant, so two of the same name cannot both pass the check.
        await tx.query('SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE', [input.tenantId]);
        const taken = await tx.query('SELECT 1 FROM sites WHERE tenant_id = $1 AND name = $2', [
          input.tenantId,
          input.name,
        ]);
        if (taken.rowCount > 0) {
          throw new ComputeError('CONFLICT', `site ${input.name} exists`, { details: { path: ['name'] } });
        }
        const id = newId('site');
        const now = ctx.clock.now();
        // Core has no repository for sites: metal, which owns the sites API, writes the row.
        await tx.query('INSERT INTO sites (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)', [
          id,
          input.tenantId,
          input.name,
          now,
        ]);
        await ctx.events.publish(tx, {
          tenantId: input.tenantId,
          subject: `site/${id}`,
          type: 'metal.site.created',
          data: { siteId: id, name: input.name },
        });
        return { id, tenantId: input.tenantId, name: input.name, createdAt: now.toISOString() };
      });
    },
  });

  const joinToken = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      siteId: textSchema('siteId'),
      ttlSeconds: v.optional(
        v.pipe(
          v.number('ttlSeconds must be a number'),
          v.integer('ttlSeconds must be a whole number'),
          v.minValue(60, 'ttlSeconds must be at least 60'),
          v.maxValue(SITE_TOKEN_TTL.maxSeconds, `ttlSeconds must be at most ${SITE_TOKEN_TTL.maxSeconds}`),
        ),
        SITE_TOKEN_TTL.defaultSeconds,
      ),
      maxUses: v.optional(
        v.pipe(
          v.number('maxUses must be a number'),
          v.integer('maxUses must be a whole number'),
          v.minValue(1, 'maxUses must be at least 1'),
          v.maxValue(100, 'maxUses must be at most 100'),
        ),
        1,
      ),
    }),
    permission: 'compute:sites:manage',
    resource: (input, ctx) => resolveSiteResource(ctx.sql, input.tenantId, input.siteId),
    description:
      'Mints a join token for a site agent of the site (role site; single use and one hour by default). The token ' +
      'is returned once.',
    handler: async (input, ctx): Promise<SiteJoinToken> => {
      const pki = ctx.pki;
      if (!pki) {
        throw new ComputeError('INVALID_CONFIG', 'a site join token needs ctx.pki (install the pki module)', {
          details: { path: ['pki'] },
        });
      }
      const issued = await ctx.sql.transaction(async (tx) => {
        const minted = await pki.issueJoinToken(tx, {
          tenantId: input.tenantId,
          role: 'site',
          siteId: input.siteId,
          ttlSeconds: input.ttlSeconds,
          maxUses: input.maxUses,
        });
        await ctx.events.publish(tx, {
          tenantId: input.tenantId,
          subject: `site/${input.siteId}`,
          type: 'metal.site.joinToken',
          data: { siteId: input.siteId, tokenId: minted.id, ttlSeconds: input.ttlSeconds, maxUses: input.maxUses },
        });
        return minted;
      });
      return {
        tokenId: issued.id,
        token: issued.token,
        siteId: input.siteId,
        expiresAt: new Date(ctx.clock.now().getTime() + input.ttlSeconds * 1000).toISOString(),
        maxUses: input.maxUses,
      };
    },
  });

  return defineApiGroup('sites', { create, joinToken });
}

/** The `sites` group {@link sitesApi} returns. */
export type SitesApi = ReturnType<typeof sitesApi>;
