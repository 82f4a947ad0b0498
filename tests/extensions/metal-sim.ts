import type { Json, SqlExecutor } from 'better-compute/core';
import {
  createMetalSim,
  type MetalSim,
  type MetalSimOptions,
  type SimMachine,
  type SimMachineSpec,
  type SimSite,
} from 'better-compute/testkit';
import { expect } from 'vitest';

// The simulator fixture the extension tests share: createMetalSim with the user-data variables the built-in
// templates need, and the few helpers every scenario uses. Everything else is the testkit's.

/** What provision's built-in cloud-init and ignition templates need. */
export const USER_DATA = {
  controlPlaneUrl: 'https://cp.sim.example',
  bcdUrl: 'https://downloads.sim.example/bcd/0.2.0/bcd-linux-amd64',
  bcdSha256: 'b'.repeat(64),
};

/** A simulated site around a fresh compute; `options.provision.userData` defaults to {@link USER_DATA}. */
export function createSim(options: MetalSimOptions = {}): Promise<MetalSim> {
  return createMetalSim({
    ...options,
    provision: { ...options.provision, userData: { ...USER_DATA, ...options.provision?.userData } },
  });
}

/** `count` machines racked in `site`, enrolled and settled to `available`. */
export async function availableMachines(
  sim: MetalSim,
  site: SimSite,
  count: number,
  spec: SimMachineSpec = {},
): Promise<SimMachine[]> {
  const machines = Array.from({ length: count }, () => sim.addMachine(site, spec));
  for (const machine of machines) await sim.enroll(machine);
  await sim.settle();
  for (const machine of machines) expect((await sim.get(machine)).state).toBe('available');
  return machines;
}

/** The destructive commands the agents ran more than once under one key (none, ever). */
export function destructiveRunTwice(sim: MetalSim): string[] {
  const seen = new Map<string, number>();
  for (const command of sim.commands) {
    if (!command.destructive) continue;
    const id = `${command.agentNodeId} ${command.key}`;
    seen.set(id, (seen.get(id) ?? 0) + 1);
  }
  return [...seen].filter(([, n]) => n > 1).map(([id]) => id);
}

/** What the site agent and the machines ran, as `role kind[/operation] outcome` lines, in order. */
export function ran(sim: MetalSim, machine?: SimMachine): string[] {
  return sim.commands
    .filter((c) => !machine || c.targetNodeId === machine.nodeId || c.agentNodeId === machine.nodeId)
    .map((c) => `${c.role} ${c.operation ?? c.kind} ${c.outcome}`);
}

/**
 * Every text, varchar and jsonb cell of every table that contains one of `needles`, as `table.column` (to prove no
 * secret was stored in clear).
 */
export async function cellsContaining(sql: SqlExecutor, needles: readonly string[]): Promise<string[]> {
  const { rows: columns } = await sql.query<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'ARRAY')`,
  );
  const hits: string[] = [];
  for (const { table_name, column_name } of columns) {
    const { rows } = await sql.query<{ v: string | null }>(`SELECT "${column_name}"::text AS v FROM "${table_name}"`);
    if (rows.some(({ v }) => v !== null && needles.some((needle) => v.includes(needle)))) {
      hits.push(`${table_name}.${column_name}`);
    }
  }
  return hits;
}

/** The machine's events (`metal.node.*`), oldest first. */
export async function nodeEvents(sim: MetalSim, machine: SimMachine): Promise<string[]> {
  const { rows } = await sim.database.query<{ type: string }>(
    'SELECT type FROM events WHERE subject = $1 ORDER BY seq',
    [`node/${machine.nodeId}`],
  );
  return rows.map((row) => row.type);
}

/** The steps of a workflow as `action state` lines. */
export async function stepsOf(sim: MetalSim, workflowId: string): Promise<string[]> {
  const { rows } = await sim.database.query<{ action: string; state: string; error: Json }>(
    'SELECT action, state, error FROM workflow_steps WHERE workflow_id = $1 ORDER BY position',
    [workflowId],
  );
  return rows.map((row) => `${row.action} ${row.state}`);
}
