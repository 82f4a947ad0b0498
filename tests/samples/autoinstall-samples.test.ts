// steps/render-iso.ts and the compute.ts wiring of steps-and-profiles.md, as written there.
import { createHash, randomBytes } from 'node:crypto';
import { betterCompute, definePlugin, manifest } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import { pki } from 'better-compute/pki';
import { defineProfile, defineStep, getWorkflow, provisionModule, renderTemplate } from 'better-compute/provision';
import { createFakeClock, insertNode, insertSite, settle } from 'better-compute/testkit';
import { describe, expect, it } from 'vitest';

// What the sample leaves to the plugin author: the template and the ISO build behind the site cache.
const autoinstallTemplate =
  '#cloud-config\nautoinstall:\n  identity: { hostname: {{hostname}} }\n  late-commands: [ "bcd join --token-file /target/etc/bcd/token" ]\n# token: {{joinToken}}\n';
const published = new Map<string, string>();
async function publishIso(digest: string, userData: string): Promise<void> {
  published.set(digest, userData);
}

export const renderAutoinstallIso = defineStep({
  id: 'autoinstall.renderIso',
  runsOn: 'control-plane',
  timeout: '5m',
  retrySafe: false,
  input: manifest({}),
  async run(_input, ctx) {
    const node = ctx.node!;
    const { token } = await ctx.sql.transaction((tx) =>
      ctx.pki!.issueJoinToken(tx, {
        tenantId: 'root',
        role: 'provisioned',
        siteId: node.siteId,
        ttlSeconds: 7200,
        maxUses: 1,
      }),
    );
    const userData = renderTemplate(autoinstallTemplate, { hostname: node.id.replace(/_/g, '-'), joinToken: token });
    const digest = createHash('sha256').update(userData).digest('hex');
    await publishIso(digest, userData); // your ISO build and storage behind the site cache
    return { url: `https://cache.site-a/autoinstall/${digest}.iso` };
  },
});

// profiles/ubuntu-autoinstall.ts (its media, management and power steps come with metal).
export const ubuntuAutoinstall = defineProfile({
  id: 'ubuntu-24.04-autoinstall',
  version: 1,
  target: 'metal',
  role: 'host',
  steps: [
    { use: 'autoinstall.renderIso' },
    { use: 'media.insert', on: 'site', with: { fromStep: 'autoinstall.renderIso' } },
    { use: 'management.setBootDevice', on: 'site', with: { device: 'cd' } },
    { use: 'power.setPower', on: 'site', with: { action: 'cycle' } },
    { use: 'wait.agentJoined', with: { role: 'node' } },
    { use: 'media.eject', on: 'site' },
  ],
});
const renderOnly = defineProfile({
  id: 'autoinstall-render',
  version: 1,
  target: 'metal',
  steps: [{ use: 'autoinstall.renderIso' }],
});

describe('the autoinstall samples', () => {
  it('wire as a plugin the engine borrows, and render the ISO with a fresh join token', async () => {
    const clock = createFakeClock();
    const database = await createPgliteDatabase();
    const security = pki({ key: randomBytes(32).toString('hex') });
    // 2. As a plugin: the engine borrows its steps and profiles, the plugin registers them itself.
    const acmeAutoinstall = definePlugin({
      id: 'acme-autoinstall',
      extensions: [renderAutoinstallIso],
      profiles: [ubuntuAutoinstall, renderOnly],
    });
    const provisionWithPlugin = provisionModule({ modules: [acmeAutoinstall] });
    const compute = await betterCompute({
      database,
      clock,
      modules: [security.module, provisionWithPlugin],
      plugins: [acmeAutoinstall],
      pki: security.port(),
      secrets: security.secrets(database),
    });
    try {
      const siteId = await insertSite(database, {}, clock);
      const nodeId = await insertNode(database, { siteId }, clock);
      const { id } = await database.transaction((tx) =>
        compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'autoinstall-render', nodeId }),
      );
      await settle(compute, { clock });
      const wf = await getWorkflow(database, { workflowId: id });
      const [digest, userData] = [...published.entries()][0] ?? [];
      expect(wf.steps[0]?.result).toEqual({ url: `https://cache.site-a/autoinstall/${digest}.iso` });
      expect(userData).toContain(`hostname: ${nodeId.replace(/_/g, '-')}`);
      expect(userData).toMatch(/# token: tok_/);
      // The shipped Ubuntu profile needs metal's steps: validating it names each one that does not resolve.
      const error = await database
        .transaction((tx) =>
          compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'ubuntu-24.04-autoinstall', nodeId }),
        )
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'INVALID_INPUT' });
      const paths = (error as { details: { issues: { path: unknown[] }[] } }).details.issues.map((i) =>
        i.path.join('.'),
      );
      expect(paths).toEqual(['steps.1.use', 'steps.2.use', 'steps.3.use', 'steps.5.use']);
    } finally {
      await compute.close();
      await database.close();
    }
  });
});
