import { ComputeError, field, manifest } from '@better-compute/core';
import type { StagedWrite } from '@better-compute/core/kernel';
import { getNode } from '@better-compute/core/nodes';
import {
  type AwaitCommandInput,
  awaitCommands,
  defineStep,
  isStepNotReady,
  type StepContext,
  stepCommandKey,
  stepNotReady,
} from '@better-compute/provision';
import { sentCommand } from './machine-read';
import { driverCommand, type MetalMachine, machineForStep, siteRelayAgent } from './relay';

/** How long the join token of a ramdisk boot entry lives, unless the profile step says otherwise: one hour. */
export const RAMDISK_TOKEN_TTL_SECONDS = 3_600;

/**
 * How long `metal.ensureRamdisk` waits between looks for the ramdisk agent once the machine is power-cycled. Only
 * insurance: the ramdisk agent opening its session queues the workflow at once (provision's `wakeOnAgentSession`), and
 * a GPU server's firmware takes minutes to boot, so a thousand machines booting are not each read every minute.
 *
 * @example
 * ```ts
 * throw stepNotReady(RAMDISK_WAIT_MS);
 * ```
 */
export const RAMDISK_WAIT_MS = 300_000;

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
 * commands the agents have; on the first attempt, those the machine's read found). With the broker's `stageDelete`
 * and the engine's `writeWithResult` the deletion is written by the statement that settles the step (a run whose
 * settle does not commit deletes nothing, and its re-run deletes them); else each one now. Deleting twice is harmless
 * (a re-run after a crash deletes nothing more); a broker that can do neither leaves them. Only references are
 * read, never the tokens.
 */
async function deleteBootEntrySecrets(ctx: StepContext, machine: MetalMachine, macs: string[]): Promise<void> {
  const remove = ctx.secrets?.delete?.bind(ctx.secrets);
  const stage = ctx.secrets?.stageDelete?.bind(ctx.secrets);
  if (!remove && !stage) return;
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
  const stored = refs.filter((ref): ref is string => typeof ref === 'string' && ref.length > 0);
  if (stage && ctx.writeWithResult) {
    // Deleting used tokens changes nothing the engine or a step's run reads: what follows is planned in its statement.
    if (stored.length > 0) ctx.writeWithResult({ ...stage(stored), leaves: {} });
    return;
  }
  if (remove) await Promise.all(stored.map((ref) => remove(ref)));
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
 * The boot entries of the sequence, one per MAC (`site.bootEntry { mac, mode: 'ramdisk', tokenRef }` under
 * `boot-entry:<mac>`): an entry the machine's read found already sent is only waited for; the missing ones get their
 * tokens minted together, each token written by the statement that sends its entry.
 */
async function bootEntries(
  ctx: StepContext,
  machine: MetalMachine,
  agentNodeId: string,
  ttl: number,
): Promise<AwaitCommandInput[]> {
  const macs = machine.macs ?? [];
  const found = new Map(macs.map((mac) => [mac, sentCommand(ctx, machine, agentNodeId, `boot-entry:${mac}`)]));
  const tokens = await mintBootTokens(
    ctx,
    machine,
    agentNodeId,
    macs.filter((mac) => !found.get(mac)),
    ttl,
  );
  return macs.map((mac) => {
    const command = found.get(mac);
    const token = tokens.get(mac);
    return {
      nodeId: agentNodeId,
      kind: 'site.bootEntry',
      key: `boot-entry:${mac}`,
      targetNodeId: machine.nodeId,
      payload: { mac, mode: 'ramdisk', ...(token ? { tokenRef: token.ref } : {}) },
      ...(token?.write ? { with: token.write } : {}),
      ...(command === undefined ? {} : { found: command }),
    };
  });
}

/**
 * Whether the sequence's power cycle was under way (given to the site agent, not settled) before `connectedAt`, with
 * every command before it succeeded, as this run's read found them: then a ramdisk joining at `connectedAt` booted
 * from this sequence, whether or not the BMC's answer is in.
 */
function cycledBefore(sequence: readonly AwaitCommandInput[], connectedAt: Date): boolean {
  const cycle = sequence.at(-1)?.found;
  if (!cycle || !['dispatched', 'acked', 'running'].includes(cycle.state)) return false;
  if (cycle.createdAt.getTime() > connectedAt.getTime()) return false;
  return sequence.slice(0, -1).every((command) => command.found?.state === 'succeeded');
}

/**
 * `metal.ensureRamdisk`: brings the machine up in the ramdisk, each command under its own key so a re-run (after a
 * crash, or while one is still open) skips what is done: a one-time PXE boot (`driver.invoke`
 * `management.setBootDevice { device: 'pxe', persistent: false }`, key `:boot-device`), a boot entry per MAC
 * (`site.bootEntry { mac, mode: 'ramdisk', tokenRef }` to the same site agent, key `:boot-entry:<mac>`, each with a
 * fresh single-use `node` join token bound to the machine and expecting that MAC), and a power cycle (`driver.invoke`
 * `power.setPower { action: 'cycle' }`, key `:power-cycle`), in that order as one sequence (`awaitCommands`): sent
 * together by one statement, given to the site agent one after the other as each succeeds, the rest cancelled when one
 * fails. Then it waits (`stepNotReady`) until the machine's
 * agent is connected in role `ramdisk`, having connected after the workflow started, deletes the secrets that held the
 * boot entries' tokens (with its result where the broker can stage it, else `ctx.secrets.delete`), and returns `{ bootId, connectedAt, macs }`.
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
    // One sequence, sent together by one statement: the site agent is given each command once the one before it
    // succeeded, and a failure cancels the rest. The power cycle's success runs nothing (the ramdisk's joining does);
    // its failure, or any other's, runs the step again at once. Until all are done the step waits (stepNotReady).
    const bootDevice = driverCommand(ctx, machine, agentNodeId, {
      operation: 'management.setBootDevice',
      input: { device: 'pxe', persistent: false },
      key: 'boot-device',
    });
    const powerCycle = driverCommand(ctx, machine, agentNodeId, {
      operation: 'power.setPower',
      input: { action: 'cycle' },
      key: 'power-cycle',
      wakeOn: 'failure',
    });
    // A sequence waits the first input's pollMs: the ramdisk's, since its joining is what the step waits for.
    const sequence = [
      { ...bootDevice, pollMs: RAMDISK_WAIT_MS },
      ...(await bootEntries(ctx, machine, agentNodeId, input.tokenTtlSeconds)),
      powerCycle,
    ];
    // Read with the machine, at the start of this run: a ramdisk that joins later wakes the workflow for another.
    const session = machine.session ?? null;
    const since = machine.workflowStartedAt ?? new Date(0);
    const joined = session?.role === 'ramdisk' && session.connectedAt.getTime() >= since.getTime();
    try {
      await awaitCommands(ctx, sequence);
    } catch (error) {
      // A BMC may report the cycle only after the machine is up: the ramdisk's joining since is the proof it booted.
      if (!isStepNotReady(error) || !joined || !cycledBefore(sequence, session.connectedAt)) throw error;
    }
    if (!joined) throw stepNotReady(RAMDISK_WAIT_MS);
    // The ramdisk joined: its single-use token is spent, and no boot entry needs the others any more.
    await deleteBootEntrySecrets(ctx, machine, macs);
    return {
      bootId: session.bootId ?? undefined,
      connectedAt: session.connectedAt.toISOString(),
      macs: macs.length,
    };
  },
});
