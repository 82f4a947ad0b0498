// steps/render-iso.ts and profiles/ubuntu-autoinstall.ts of steps-and-profiles.md, wired as its compute.ts does.
import { randomBytes } from 'node:crypto';
import { betterCompute, definePlugin } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import { pki } from 'better-compute/pki';
import { defineProfile, getWorkflow, provisionModule } from 'better-compute/provision';
import { createFakeClock, insertNode, insertSite, settle } from 'better-compute/testkit';
import { describe, expect, it } from 'vitest';
import { ubuntuAutoinstall } from './metal/profiles/ubuntu-autoinstall';
import { publishedIsos, renderAutoinstallIso } from './metal/steps/render-iso';

// The page's step and profile, as written there, live in ./metal (shared with the metal samples and the walkthrough).
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
      // The ISO this workflow published (the map may hold others' when files share a process).
      const url = (wf.steps[0]?.result as { url?: string } | null)?.url ?? '';
      const digest = /autoinstall\/([0-9a-f]{64})\.iso$/.exec(url)?.[1];
      expect(digest).toBeDefined();
      const userData = publishedIsos.get(digest ?? '');
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
