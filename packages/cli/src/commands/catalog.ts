import { EXIT, usage } from '../errors';
import { cell, colorState, keyValues, table } from '../output';
import type { Handler } from '../runtime';
import { printPage, readPages, readText } from './shared';

interface Image {
  id?: string;
  tenantId: string;
  name: string;
  version: string;
  digest: string;
  signerId?: string | null;
  url?: string | null;
  public?: boolean;
  createdAt?: string;
}

export const imagesList: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const page = await readPages<Image>(client, 'images.list', { name: opts.name }, opts);
  printPage(
    rt.out,
    page,
    (i) => `${i.name}@${i.version}`,
    () =>
      table(
        ['image', 'owner', 'digest', 'public', 'created'],
        page.items.map((i) => [
          `${i.name}@${i.version}`,
          i.tenantId,
          i.digest,
          i.public ? 'yes' : 'no',
          cell(i.createdAt),
        ]),
        rt.out.c,
      ),
    'no images',
  );
  return 0;
};

export const imagesRegister: Handler = async (rt, _args, opts) => {
  if (opts.signature && opts.signatureFile)
    throw usage('pass --signature or --signature-file, not both', ['--signature']);
  const signature = opts.signatureFile
    ? (await readText(opts.signatureFile as string, '--signature-file')).trim()
    : (opts.signature as string | undefined);
  if (!signature) throw usage('images register needs --signature or --signature-file', ['--signature']);
  const client = await rt.client();
  const image = await client.call<Image>('images.register', {
    name: opts.name,
    version: opts.version,
    digest: opts.digest,
    signature,
    signerId: opts.signer,
    url: opts.imageUrl,
    public: opts.public === true ? true : undefined,
  });
  if (rt.out.json) rt.out.printJson(image);
  else if (rt.out.quiet) rt.out.out(`${image.name}@${image.version}`);
  else rt.out.out(`registered ${image.name}@${image.version} (${image.digest})`);
  return 0;
};

interface Site {
  id: string;
  tenantId: string;
  name: string;
  createdAt: string;
  connectedSiteAgents?: number;
  bootLeaseHolder?: string | null;
}

export const sitesList: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const page = await readPages<Site>(client, 'sites.list', {}, opts);
  printPage(
    rt.out,
    page,
    (s) => s.id,
    () =>
      table(
        ['site', 'name', 'agents', 'boot lease', 'created'],
        page.items.map((s) => [s.id, s.name, cell(s.connectedSiteAgents), cell(s.bootLeaseHolder), s.createdAt]),
        rt.out.c,
      ),
    'no sites',
  );
  return 0;
};

export const sitesCreate: Handler = async (rt, args) => {
  const client = await rt.client();
  const site = await client.call<Site>('sites.create', { name: args[0] });
  if (rt.out.json) rt.out.printJson(site);
  else if (rt.out.quiet) rt.out.out(site.id);
  else rt.out.out(`created site ${site.id} (${site.name})`);
  return 0;
};

export const sitesJoinToken: Handler = async (rt, args, opts) => {
  const client = await rt.client();
  const answer = await client.call<{
    tokenId: string;
    token: string;
    siteId: string;
    expiresAt: string;
    maxUses: number;
  }>('sites.joinToken', { siteId: args[0], ttlSeconds: opts.ttl, maxUses: opts.maxUses });
  if (rt.out.json) rt.out.printJson(answer);
  else if (rt.out.quiet) rt.out.out(answer.token);
  else {
    rt.out.out(
      keyValues(
        [
          ['token', answer.token],
          ['site', answer.siteId],
          ['expires', answer.expiresAt],
          ['uses', String(answer.maxUses)],
        ],
        rt.out.c,
      ),
    );
    rt.out.err('the join token is shown this once: hand it to the site agent (bcd site) now');
  }
  return 0;
};

interface Credential {
  id: string;
  tenantId: string;
  name: string;
  permissions: string[];
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  token?: string;
}

export const credentialsList: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const page = await readPages<Credential>(client, 'credentials.list', {}, opts);
  printPage(
    rt.out,
    page,
    (c) => c.id,
    () =>
      table(
        ['credential', 'name', 'permissions', 'created', 'expires', 'revoked'],
        page.items.map((c) => [
          c.id,
          c.name,
          c.permissions.join(','),
          c.createdAt,
          cell(c.expiresAt),
          cell(c.revokedAt),
        ]),
        rt.out.c,
      ),
    'no credentials',
  );
  return 0;
};

export const credentialsCreate: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const credential = await client.call<Credential>('credentials.create', {
    name: opts.name,
    permissions: opts.permission,
    expiresAt: opts.expiresAt,
  });
  if (rt.out.json) rt.out.printJson(credential);
  else if (rt.out.quiet) rt.out.out(credential.id);
  else {
    rt.out.out(
      keyValues(
        [
          ['credential', credential.id],
          ['name', credential.name],
          ['permissions', credential.permissions.join(', ')],
          ['expires', cell(credential.expiresAt)],
          ['token', credential.token ?? '-'],
        ],
        rt.out.c,
      ),
    );
    rt.out.err('the token is shown this once: store it now');
  }
  return 0;
};

export const credentialsRevoke: Handler = async (rt, args) => {
  const client = await rt.client();
  const answer = await client.call<{ id: string; revokedAt: string }>('credentials.revoke', { credentialId: args[0] });
  if (rt.out.json) rt.out.printJson(answer);
  else if (rt.out.quiet) rt.out.out(answer.id);
  else rt.out.out(`revoked ${answer.id} at ${answer.revokedAt}`);
  return 0;
};

interface Finding {
  id: string;
  severity: 'error' | 'warning' | 'info';
  message: string;
  details?: Record<string, unknown>;
}

const SEVERITIES = ['error', 'warning', 'info'] as const;

/** `doctor`: every module's findings grouped by severity; `--fail-on` makes findings at or above it exit 10. */
export const doctor: Handler = async (rt, _args, opts) => {
  const client = await rt.client();
  const answer = await client.call<{ modules: { moduleId: string; findings: Finding[] }[] }>('doctor.findings', {});
  const all = answer.modules.flatMap((m) => m.findings.map((f) => ({ ...f, moduleId: m.moduleId })));
  const { out } = rt;
  if (out.json) out.printJson(answer);
  else if (out.quiet) {
    for (const f of all) out.out(f.id);
  } else {
    const { c } = out;
    for (const severity of SEVERITIES) {
      const found = all.filter((f) => f.severity === severity);
      if (found.length === 0) continue;
      const title =
        severity === 'error' ? c.red('errors') : severity === 'warning' ? c.yellow('warnings') : c.cyan('info');
      out.out(`${title} (${found.length})`);
      for (const f of found) out.out(`  ${colorState(severity, c)}  ${f.moduleId}  ${f.id}  ${f.message}`);
    }
    const counts = SEVERITIES.map((s) => `${all.filter((f) => f.severity === s).length} ${s}`).join(', ');
    out.out(
      all.length === 0
        ? `no findings (${answer.modules.map((m) => m.moduleId).join(', ')} checked)`
        : `${counts} across ${answer.modules.length} modules`,
    );
  }
  const failOn = opts.failOn as (typeof SEVERITIES)[number] | undefined;
  if (failOn) {
    const threshold = SEVERITIES.indexOf(failOn);
    if (all.some((f) => SEVERITIES.indexOf(f.severity) <= threshold)) return EXIT.FINDINGS;
  }
  return 0;
};
