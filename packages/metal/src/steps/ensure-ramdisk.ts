import { ComputeError, field, manifest } from '@better-compute/core';
import { currentAgentSession } from '@better-compute/core/kernel';
import { getNode } from '@better-compute/core/nodes';
import {
  awaitCommand,
  defineStep,
  isStepNotReady,
  type StepContext,
  stepCommandKey,
  stepNotReady,
} from '@better-compute/provision';
import { invokeDriver, type MetalMachine, machineForStep, RELAY_POLL_MS, siteRelayAgent } from './relay';

/** How long the join token of a ramdisk boot entry lives, unless the profile step says otherwise: one hour. */
export const RAMDISK_TOKEN_TTL_SECONDS = 3_600;

function missingPort(name: 'pki' | 'secrets'): ComputeError {
  return new ComputeError(
    'INVALID_CONFIG',
    `metal.ensureRamdisk needs ctx.${name} to mint the ramdisk's join token: pass ${name} to betterCompute`,
    { details: { path: [name] } },
  );
}

async function machineMacs(ctx: StepContext, nodeId: string): Promise<string[]> {
  const { rows } = await ctx.sql.query<{ mac: string }>('SELECT mac FROM metal_macs WHERE node_id = $1 ORDER BY mac', [
    nodeId,
  ]);
  return rows.map((row) => row.mac);
}

async function workflowStartedAt(ctx: StepContext): Promise<Date> {
  const { rows } = await ctx.sql.query<{ at: Date | string }>(
    'SELECT COALESCE(started_at, created_at) AS at FROM workflows WHERE id = $1',
    [ctx.workflowId],
  );
  return new Date(rows[0]?.at ?? 0);
}

/**
 * Deletes the secrets holding the boot entries' join tokens once the ramdisk has joined: every `site.bootEntry` this
 * step sent to a site agent of the machine's site, in any attempt so far, found by key (indexed lookups, however many
 * commands the agents have). Deleting twice is harmless (a re-run after a crash deletes nothing more); without
 * `ctx.secrets.delete` the secrets stay. Only references are read, never the tokens.
 */
async function deleteBootEntrySecrets(ctx: StepContext, machine: MetalMachine, macs: string[]): Promise<void> {
  const remove = ctx.secrets?.delete?.bind(ctx.secrets);
  if (!remove) return;
  const keys: string[] = [];
  for (let attempt = 0; attempt <= ctx.attempt; attempt += 1) {
    for (const mac of macs) keys.push(stepCommandKey({ ...ctx, attempt }, `boot-entry:${mac}`));
  }
  const { rows } = await ctx.sql.query<{ ref: string | null }>(
    `SELECT DISTINCT c.payload->>'tokenRef' AS ref FROM commands c
     WHERE c.key = ANY($2::text[]) AND c.kind = 'site.bootEntry'
       AND c.node_id IN (SELECT n.id FROM nodes n WHERE n.site_id = $1 AND n.kind = 'site-agent')`,
    [machine.siteId, keys],
  );
  for (const { ref } of rows) {
    if (typeof ref === 'string' && ref.length > 0) await remove(ref);
  }
}

/**
 * One boot entry, find before create: an entry already sent under its key is only waited for; a missing one gets a
 * fresh single-use `node` join token bound to the machine and expecting that MAC, stored with `ctx.secrets` so only
 * its reference travels. A crash between minting and sending leaves an unused token to expire and its secret behind
 * (the secrets of the entries sent are deleted once the ramdisk joined).
 */
async function bootEntry(ctx: StepContext, machine: MetalMachine, agentNodeId: string, mac: string, ttl: number) {
  const key = `boot-entry:${mac}`;
  const existing = await ctx.commands.findByKey(ctx.sql, agentNodeId, stepCommandKey(ctx, key));
  let tokenRef: string | undefined;
  if (!existing) {
    const { pki, secrets } = ctx;
    if (!pki) throw missingPort('pki');
    if (!secrets) throw missingPort('secrets');
    const minted = await ctx.sql.transaction((tx) =>
      pki.issueJoinToken(tx, {
        tenantId: machine.tenantId,
        role: 'node',
        nodeId: machine.nodeId,
        siteId: machine.siteId,
        ttlSeconds: ttl,
        maxUses: 1,
        expect: { mac },
      }),
    );
    // The site agent fetches the token through the command that carries its reference, in the agent's own tenant.
    const agent = await getNode(ctx.sql, agentNodeId);
    tokenRef = await secrets.put(agent?.tenantId ?? machine.tenantId, minted.token);
  }
  return awaitCommand(ctx, {
    nodeId: agentNodeId,
    kind: 'site.bootEntry',
    key,
    targetNodeId: machine.nodeId,
    payload: { mac, mode: 'ramdisk', ...(tokenRef ? { tokenRef } : {}) },
  });
}

/**
 * `metal.ensureRamdisk`: brings the machine up in the ramdisk, each command under its own key so a re-run (after a
 * crash, or while one is still open) skips what is done: a one-time PXE boot (`driver.invoke`
 * `management.setBootDevice { device: 'pxe', persistent: false }`, key `:boot-device`), a boot entry per MAC
 * (`site.bootEntry { mac, mode: 'ramdisk', tokenRef }` to the same site agent, key `:boot-entry:<mac>`, each with a
 * fresh single-use `node` join token bound to the machine and expecting that MAC), and a power cycle (`driver.invoke`
 * `power.setPower { action: 'cycle' }`, key `:power-cycle`). Then it waits (`stepNotReady`) until the machine's
 * agent is connected in role `ramdisk`, having connected after the workflow started, deletes the secrets that held the
 * boot entries' tokens (`ctx.secrets.delete`, when the broker has it), and returns `{ bootId, connectedAt, macs }`.
 * Needs `ctx.pki` and `ctx.secrets` (INVALID_CONFIG without them) and at least one MAC (INVALID_STATE).
 *
 * @example
 * ```ts
 * const steps = [{ use: 'metal.ensureRamdisk' }, { use: 'inspect.collect', on: 'ramdisk' }];
 * ```
 */
export const ensureRamdisk = defineStep({
  id: 'metal.ensureRamdisk',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['driver.invoke', 'site.bootEntry'],
  timeout: '20m',
  retrySafe: true,
  input: manifest({
    tokenTtlSeconds: field
      .int({ min: 60, max: 86_400 })
      .default(RAMDISK_TOKEN_TTL_SECONDS)
      .describe("Lifetime of each boot entry's join token."),
  }),
  description:
    'PXE-boots the machine into the ramdisk (one-time boot device, boot entries, power cycle) and waits for it.',
  async run(input, ctx) {
    const machine = await machineForStep(ctx, 'metal.ensureRamdisk');
    const macs = await machineMacs(ctx, machine.nodeId);
    if (macs.length === 0) {
      throw new ComputeError('INVALID_STATE', `machine ${machine.nodeId} has no MAC to PXE-boot`, {
        details: { path: ['macs'], reason: 'no-macs' },
      });
    }
    const agentNodeId = await siteRelayAgent(ctx, machine, 'boot-device');
    await invokeDriver(ctx, machine, {
      operation: 'management.setBootDevice',
      input: { device: 'pxe', persistent: false },
      key: 'boot-device',
      agentNodeId,
    });
    let open = false;
    for (const mac of macs) {
      try {
        await bootEntry(ctx, machine, agentNodeId, mac, input.tokenTtlSeconds);
      } catch (error) {
        if (!isStepNotReady(error)) throw error;
        open = true;
      }
    }
    if (open) throw stepNotReady(RELAY_POLL_MS);
    await invokeDriver(ctx, machine, {
      operation: 'power.setPower',
      input: { action: 'cycle' },
      key: 'power-cycle',
      agentNodeId,
    });
    const since = await workflowStartedAt(ctx);
    const session = await currentAgentSession(ctx.sql, machine.nodeId, { now: ctx.clock.now() });
    if (session?.role !== 'ramdisk' || session.connectedAt.getTime() < since.getTime()) {
      throw stepNotReady(5_000);
    }
    // The ramdisk joined: its single-use token is spent, and no boot entry needs the others any more.
    await deleteBootEntrySecrets(ctx, machine, macs);
    return { bootId: session.bootId, connectedAt: new Date(session.connectedAt).toISOString(), macs: macs.length };
  },
});
