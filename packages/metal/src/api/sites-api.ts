import { ComputeError, defineApiGroup, defineApiMethod, newId, resolveTenantResource } from '@better-compute/core';
import * as v from 'valibot';
import { decodeSiteCursor, encodeSiteCursor, METAL_DEFAULT_LIMIT, METAL_MAX_LIMIT } from './cursor';
import { checkStorable, textSchema } from './inputs';
import { resolveSiteResource } from './metal-api';

/** A site as `sites.create` returns it. */
export interface SiteView {
  id: string;
  tenantId: string;
  name: string;
  createdAt: string;
}

/** A site as `sites.list` shows it: with its connected site agents and the one holding the boot lease. */
export interface SiteSummary extends SiteView {
  /** Site agents of the site with an open session seen within the last minute. */
  connectedSiteAgents: number;
  /** The site agent (node id) holding the site's boot lease while its session is live, else `null`. */
  bootLeaseHolder: string | null;
}

/** A page of `sites.list`, newest first: pass `nextCursor` back as `cursor`; `null` on the last page. */
export interface SitesPage {
  items: SiteSummary[];
  nextCursor: string | null;
}

/** How long a site agent's session counts as connected without a touch (the kernel's default freshness). */
const SESSION_STALE_AFTER_MS = 60_000;

// Per site, two index lookups: the site agents (nodes_site_idx) with a live session (agent_sessions_node_idx), and the
// lease row with its holder's session.
const LIST_SITES = `
SELECT s.id, s.tenant_id, s.name, s.created_at,
  to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key,
  (SELECT count(DISTINCT n.id) FROM nodes n JOIN agent_sessions a ON a.node_id = n.id
    WHERE n.site_id = s.id AND n.kind = 'site-agent' AND a.closed_at IS NULL AND a.last_seen_at > $2)::int
    AS connected_site_agents,
  (SELECT l.holder_node_id FROM site_boot_leases l JOIN agent_sessions a ON a.id = l.session_id
    WHERE l.site_id = s.id AND a.closed_at IS NULL AND a.last_seen_at > $2) AS boot_lease_holder
FROM sites s
WHERE s.tenant_id = $1 AND ($3::timestamptz IS NULL OR (s.created_at, s.id) < ($3::timestamptz, $4::text))
ORDER BY s.created_at DESC, s.id DESC
LIMIT $5`;

interface SiteRow {
  id: string;
  tenant_id: string;
  name: string;
  created_at: Date;
  created_key: string;
  connected_site_agents: number;
  boot_lease_holder: string | null;
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
 * need `compute:sites:manage`. `list` (`compute:sites:read`, decided on the tenant) shows the tenant's sites, newest
 * first, each with its connected site agents and its boot-lease holder. The token is returned once and nowhere stored in clear or logged.
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

  const list = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      limit: v.optional(
        v.pipe(
          v.number('limit must be a number'),
          v.integer('limit must be a whole number'),
          v.minValue(1, 'limit must be at least 1'),
          v.maxValue(METAL_MAX_LIMIT, `limit must be at most ${METAL_MAX_LIMIT}`),
        ),
        METAL_DEFAULT_LIMIT,
      ),
      cursor: v.optional(v.pipe(v.string('cursor must be a string'), v.minLength(1), v.maxLength(2048))),
    }),
    permission: 'compute:sites:read',
    resource: (input, ctx) => resolveTenantResource(ctx.sql, input.tenantId),
    description:
      "The tenant's sites, newest first, each with its connected site agents and the boot-lease holder; limit at " +
      'most 100 (default 50); nextCursor fetches the next page.',
    handler: async (input, ctx): Promise<SitesPage> => {
      const after = input.cursor === undefined ? undefined : decodeSiteCursor(input.cursor);
      const { rows } = await ctx.sql.query<SiteRow>(LIST_SITES, [
        input.tenantId,
        new Date(ctx.clock.now().getTime() - SESSION_STALE_AFTER_MS),
        after?.createdKey ?? null,
        after?.siteId ?? null,
        input.limit + 1,
      ]);
      const page = rows.slice(0, input.limit);
      const last = page.at(-1);
      return {
        items: page.map((row) => ({
          id: row.id,
          tenantId: row.tenant_id,
          name: row.name,
          createdAt: new Date(row.created_at).toISOString(),
          connectedSiteAgents: Number(row.connected_site_agents),
          bootLeaseHolder: row.boot_lease_holder,
        })),
        nextCursor:
          rows.length > input.limit && last
            ? encodeSiteCursor({ createdKey: last.created_key, siteId: last.id })
            : null,
      };
    },
  });

  return defineApiGroup('sites', { create, joinToken, list });
}

/** The `sites` group {@link sitesApi} returns. */
export type SitesApi = ReturnType<typeof sitesApi>;
