import type { Command, Json } from '@better-compute/core';
import type { BootEntry, MachineInternals } from './machine';
import type { SimOutcome } from './sim-agent';

/** What a site agent's command handling reads: its site's machines, its boot entries, and the secrets it may fetch. */
export interface SiteCommandContext {
  siteId: string;
  /** Every machine of the simulation (those of other sites are never answered for by address). */
  machines(): readonly MachineInternals[];
  /** The PXE boot entries the site's agents hold, by MAC. */
  entries: Map<string, BootEntry>;
  /**
   * A secret the live command `commandId` of this site agent carries (BMC credentials, a boot entry's token): fetched
   * with the command's id, as the agent API's `secrets.fetch` is.
   */
  fetchSecret(ref: string, commandId: string): Promise<string>;
}

const ok = (result: Json): SimOutcome => ({ outcome: 'succeed', result });
const failed = (reason: string): SimOutcome => ({ outcome: 'fail', reason });

/**
 * Takes the site's boot entry for one of `macs` (one-time: PXE consumes it), as a machine's firmware does.
 *
 * @example
 * ```ts
 * createMachine(1, siteId, {}, { takeBootEntry: (macs) => takeBootEntry(entries, macs), … });
 * ```
 */
export function takeBootEntry(entries: Map<string, BootEntry>, macs: readonly string[]): BootEntry | undefined {
  for (const mac of macs) {
    const entry = entries.get(mac);
    if (entry) {
      entries.delete(mac);
      return entry;
    }
  }
  return undefined;
}

function faultOutcome(machine: MachineInternals | undefined, command: Command, operation?: string) {
  const fault = machine?.takeFault(command, operation);
  if (!fault) return undefined;
  return fault.hang ? ({ outcome: 'hang' } as const) : failed(fault.reason ?? 'simulated failure');
}

async function driverInvoke(ctx: SiteCommandContext, command: Command, payload: Record<string, Json>) {
  const operation = String(payload.operation);
  const bmc = payload.bmc as { address?: string; credentialRef?: string } | undefined;
  const machines = ctx.machines();
  const machine = bmc?.address
    ? machines.find((m) => m.siteId === ctx.siteId && m.bmc.address === bmc.address)
    : command.targetNodeId === undefined
      ? undefined
      : machines.find((m) => m.nodeId === command.targetNodeId);
  if (!machine) return failed(`no BMC answers at ${bmc?.address ?? 'an unknown address'}`);
  const fault = faultOutcome(machine, command, operation);
  if (fault) return fault;
  if (machine.faults.bmcUnreachable) return failed(`BMC ${machine.bmc.address} is unreachable`);
  const wanted = machine.spec.bmcCredentials;
  if (wanted) {
    if (!bmc?.credentialRef) return failed(`BMC ${machine.bmc.address} refused: no credentials`);
    let given: unknown;
    try {
      given = JSON.parse(await ctx.fetchSecret(bmc.credentialRef, command.id));
    } catch (error) {
      return failed(`BMC credentials unavailable (${(error as Error).message})`);
    }
    const { username, password } = given as { username?: unknown; password?: unknown };
    if (username !== wanted.username || password !== wanted.password) {
      return failed(`BMC ${machine.bmc.address} refused the credentials`);
    }
  }
  return machine.driver(operation, (payload.input ?? {}) as Record<string, Json>);
}

async function bootEntry(ctx: SiteCommandContext, command: Command, payload: Record<string, Json>) {
  const mac = String(payload.mac);
  const fault = faultOutcome(
    ctx.machines().find((m) => m.spec.macs.includes(mac)),
    command,
  );
  if (fault) return fault;
  if (payload.mode !== 'ramdisk') {
    ctx.entries.delete(mac);
    return ok({ mac, mode: String(payload.mode) });
  }
  let value: string;
  try {
    value = await ctx.fetchSecret(String(payload.tokenRef), command.id);
  } catch (error) {
    return failed(`could not fetch the boot entry's token (${(error as Error).message})`);
  }
  ctx.entries.set(mac, { mac, token: value });
  return ok({ mac, mode: 'ramdisk' });
}

function httpProxy(ctx: SiteCommandContext, command: Command, payload: Record<string, Json>): SimOutcome {
  let url: URL;
  try {
    url = new URL(String(payload.url));
  } catch {
    return { outcome: 'reject', reason: 'not a URL' };
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const machine = ctx.machines().find((m) => m.siteId === ctx.siteId && m.spec.addresses.includes(host));
  const fault = faultOutcome(machine, command);
  if (fault) return fault;
  const answer = machine?.httpRequest({
    method: String(payload.method ?? 'GET'),
    url,
    headers: (payload.headers ?? {}) as Record<string, string>,
    ...(typeof payload.body === 'string' ? { body: payload.body } : {}),
  });
  if (!answer) return failed(`connection to ${url.host} refused`);
  return ok({ status: answer.status, headers: answer.headers ?? {}, body: answer.body ?? '' });
}

/**
 * A site agent's side of one command, from the machine models: `driver.invoke` (the BMC's credentials, fetched
 * through the command's secret ref, checked; then the machine's driver operation), `site.bootEntry` (the PXE entry
 * and its token, fetched) and `site.httpProxy` (a request to a machine's address). Any other kind is rejected. The
 * in-process simulator and the simulated site over HTTP both answer with it.
 *
 * @example
 * ```ts
 * const outcome = await siteCommand({ siteId, machines: () => machines, entries, fetchSecret }, command);
 * ```
 */
export function siteCommand(ctx: SiteCommandContext, command: Command): Promise<SimOutcome> {
  const payload = (command.payload ?? {}) as Record<string, Json>;
  switch (command.kind) {
    case 'driver.invoke':
      return driverInvoke(ctx, command, payload);
    case 'site.bootEntry':
      return bootEntry(ctx, command, payload);
    case 'site.httpProxy':
      return Promise.resolve(httpProxy(ctx, command, payload));
    default:
      return Promise.resolve({ outcome: 'reject', reason: `the site agent does not implement ${command.kind}` });
  }
}
