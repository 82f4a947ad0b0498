// steps/render-iso.ts of steps-and-profiles.md ("defineStep"), as written there.
import { createHash } from 'node:crypto';
import { manifest } from 'better-compute/core';
import { defineStep, renderTemplate } from 'better-compute/provision';

// What the page leaves to the plugin author: the template, and the ISO build and storage behind the site cache.
const autoinstallTemplate =
  '#cloud-config\nautoinstall:\n  identity: { hostname: {{hostname}} }\n  late-commands: [ "bcd join --token-file /target/etc/bcd/token" ]\n# token: {{joinToken}}\n';
export const publishedIsos = new Map<string, string>();
async function publishIso(digest: string, userData: string): Promise<void> {
  publishedIsos.set(digest, userData);
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
