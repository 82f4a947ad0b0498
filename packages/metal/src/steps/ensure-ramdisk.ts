import { ComputeError, field, manifest } from '@better-compute/core';
import type { StagedWrite } from '@better-compute/core/kernel';
import { getNode } from '@better-compute/core/nodes';
import {
  awaitCommand,
  defineStep,
  isStepNotReady,
  type StepContext,
  stepCommandKey,
  stepNotReady,
} from '@better-compute/provision';
import { sentCommand } from './machine-read';
import { invokeDriver, type MetalMachine, machineForStep, RELAYED_COMMAND_POLL_MS, siteRelayAgent } from './relay';

/** How long the join token of a ramdisk boot entry lives, unless the profile step says otherwise: one hour. */
export const RAMDISK_TOKEN_TTL_SECONDS = 3_600;

/**
 * How long `metal.ensureRamdisk` waits between looks for the ramdisk agent once the machine is power-cycled. Only a
 * fallback: the ramdisk agent opening its session queues the workflow at once (provision's `wakeOnAgentSession`), so
 * a boot of minutes is not read every few seconds.
 *
 * @example
 * ```ts
 * throw stepNotReady(RAMDISK_WAIT_MS);
 * ```
 */
export const RAMDISK_WAIT_MS = 60_000;

function missingPort(name: 'pki' | 'secrets'): ComputeError {
  return new ComputeError(
    'INVALID_CONFIG',
    `metal.ensureRamdisk needs ctx.${name} to mint the ramdisk's join token: pass ${name} to betterCompute`,
    { details: { path: [name] } },
  );
}

/**
 * Deletes the secrets holding the boot entries' join tokens once the ramdisk has joined: every `site.bootEntry` this
 * step sent to a site agent of the machine's site, in any attempt so far, found by key (indexed lookups, however many
 * commands the agents have; on the first attempt, those the machine's read found). Deleting twice is harmless (a re-run after a crash deletes nothing more); without
 * `ctx.secrets.delete` the secrets stay. Only references are read, never the tokens.
 */
async function deleteBootEntrySecrets(ctx: StepContext, machine: MetalMachine, macs: string[]): Promise<void> {
  const remove = ctx.secrets?.delete?.bind(ctx.secrets);
  if (!remove) return;
  let refs: unknown[];
  if (ctx.attempt === 0 && machine.sent) {
    // The first attempt's entries are every entry there is, and the machine's read already holds them all.
    const sent = machine.sent.commands.filter((c) => c.kind === 'site.bootEntry');
    refs = [...new Set(sent.map((c) => (c.payload as { tokenRef?: unknown } | null)?.tokenRef))];
  } else {
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
    refs = rows.map((row) => row.ref);
  }
  await Promise.all(refs.map((ref) => (typeof ref === 'string' && ref.length > 0 ? remove(ref) : undefined)));
}

/** A boot entry's token as its command carries it: the secret's reference, and the write to send it with. */
interface BootToken {
  ref: string;
  write?: StagedWrite;
}

/**
 * Mints what the boot entries not sent yet carry: a fresh single-use `node` join token per MAC, bound to the machine
 * and expecting that MAC, each stored as a secret so only its reference travels (in the site agent's tenant: the
 * agent fetches it through the command that carries the reference). With the PKI port's `stageJoinTokenSecret` the
 * token and its secret are only prepared here and written by the statement that sends the entry (a token exists
 * exactly when its entry does, and the boot device's result is followed by one statement, not two); else minted now,
 * by one statement with `issueJoinTokenSecret`, or with `ctx.secrets`, where a crash before the send leaves an unused
 * token to expire and its secret behind. Returns the token per MAC.
 */
async function mintBootTokens(
  ctx: StepContext,
  machine: MetalMachine,
  agentNodeId: string,
  macs: readonly string[],
  ttl: number,
): Promise<Map<string, BootToken>> {
  const tokens = new Map<string, BootToken>();
  if (macs.length === 0) return tokens;
  const { pki, secrets } = ctx;
  if (!pki) throw missingPort('pki');
  if (!secrets) throw missingPort('secrets');
  const agentTenant =
    machine.sent?.agentTenants.get(agentNodeId) ?? (await getNode(ctx.sql, agentNodeId))?.tenantId ?? machine.tenantId;
  const staged = pki.stageJoinTokenSecret?.bind(pki);
  const sealed = pki.issueJoinTokenSecret?.bind(pki);
  const inputOf = (mac: string) =>
    ({
      tenantId: machine.tenantId,
      role: 'node',
      nodeId: machine.nodeId,
      siteId: machine.siteId,
      ttlSeconds: ttl,
      maxUses: 1,
      expect: { mac },
      secretTenantId: agentTenant,
    }) as const;
  if (staged) {
    for (const mac of macs) {
      const { ref, write } = staged(inputOf(mac));
      tokens.set(mac, { ref, write });
    }
    return tokens;
  }
  // Each MAC's token and secret at once, not in a transaction: this sits between a result and the next command.
  const stored = await Promise.all(
    macs.map(async (mac) => {
      const { secretTenantId, ...input } = inputOf(mac);
      if (sealed) return [mac, (await sealed(ctx.sql, inputOf(mac))).ref] as const;
      const token = await pki.issueJoinToken(ctx.sql, input);
      return [mac, await secrets.put(secretTenantId, token.token)] as const;
    }),
  );
  for (const [mac, ref] of stored) tokens.set(mac, { ref });
  return tokens;
}

/**
 * The boot entries, find before create: an entry already sent under its key (`boot-entry:<mac>`, found by the
 * machine's read) is only waited for, first, so one that failed fails the step before anything is minted; the
 * missing ones get their tokens minted together, then each is sent. Throws `stepNotReady` while any is open.
 */
async function bootEntries(ctx: StepContext, machine: MetalMachine, agentNodeId: string, ttl: number) {
  const macs = machine.macs ?? [];
  const found = new Map(macs.map((mac) => [mac, sentCommand(ctx, machine, agentNodeId, `boot-entry:${mac}`)]));
  let open = false;
  const entry = async (mac: string, token: BootToken | undefined) => {
    const command = found.get(mac);
    try {
      await awaitCommand(ctx, {
        nodeId: agentNodeId,
        kind: 'site.bootEntry',
        key: `boot-entry:${mac}`,
        targetNodeId: machine.nodeId,
        payload: { mac, mode: 'ramdisk', ...(token ? { tokenRef: token.ref } : {}) },
        pollMs: RELAYED_COMMAND_POLL_MS,
        ...(token?.write ? { with: token.write } : {}),
        ...(command === undefined ? {} : { found: command }),
      });
    } catch (error) {
      if (!isStepNotReady(error)) throw error;
      open = true;
    }
  };
  for (const mac of macs) if (found.get(mac)) await entry(mac, undefined);
  const missing = macs.filter((mac) => !found.get(mac));
  const tokens = await mintBootTokens(ctx, machine, agentNodeId, missing, ttl);
  // The missing entries are sent at once: each is its own statement, and the power cycle waits for them all.
  await Promise.all(missing.map((mac) => entry(mac, tokens.get(mac))));
  if (open) throw stepNotReady(RELAYED_COMMAND_POLL_MS);
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
    // One read per pass: the machine, its MACs, when the workflow started, every command this attempt sent and the
    // machine's agent's session.
    const machine = await machineForStep(ctx, 'metal.ensureRamdisk', {
      keys: ['boot-device', 'power-cycle'],
      perMac: 'boot-entry:',
      session: true,
    });
    const macs = machine.macs ?? [];
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
    await bootEntries(ctx, machine, agentNodeId, input.tokenTtlSeconds);
    await invokeDriver(ctx, machine, {
      operation: 'power.setPower',
      input: { action: 'cycle' },
      key: 'power-cycle',
      agentNodeId,
    });
    const since = machine.workflowStartedAt ?? new Date(0);
    // Read with the machine, at the start of this run: a ramdisk that joins later wakes the workflow for another.
    const session = machine.session ?? null;
    if (session?.role !== 'ramdisk' || session.connectedAt.getTime() < since.getTime()) {
      throw stepNotReady(RAMDISK_WAIT_MS);
    }
    // The ramdisk joined: its single-use token is spent, and no boot entry needs the others any more.
    await deleteBootEntrySecrets(ctx, machine, macs);
    return {
      bootId: session.bootId ?? undefined,
      connectedAt: session.connectedAt.toISOString(),
      macs: macs.length,
    };
  },
});
