import type { Json, SqlExecutor } from '@better-compute/core';
import type { DriverTarget } from '@better-compute/provision';
import { METAL_MACHINE_PRELOAD_ID, type PreloadedMachine } from './machine-preload';

/**
 * Metal's driver target: what a profile's driver operation (`{ use: 'bios.apply', on: 'site' }`, no registered step)
 * carries besides `{ operation, driver, input }`: the machine's `bmc` (`{ address, driver, credentialRef? }`), read
 * from `metal_machines` in the transaction that sends the command. A node metal does not know gets nothing added.
 * The engine reads it only for driver operations, so no other step pays for it.
 *
 * @example
 * ```ts
 * const module = { id: 'metal', extensions: [...metalSteps, metalBmcTarget] };
 * ```
 */
export const metalBmcTarget: DriverTarget = Object.freeze({
  extension: 'driver-target' as const,
  id: 'metal.bmc',
  async resolve(sql: SqlExecutor, { nodeId }: { nodeId: string }) {
    const { rows } = await sql.query<{ bmc_address: string; bmc_driver: string; bmc_credential_ref: unknown }>(
      'SELECT bmc_address, bmc_driver, bmc_credential_ref FROM metal_machines WHERE node_id = $1',
      [nodeId],
    );
    const row = rows[0];
    return row ? bmcFields(row.bmc_address, row.bmc_driver, row.bmc_credential_ref) : undefined;
  },
  // The claim's metal preload holds the same columns: a pass planned right after its claim reads nothing.
  fromReads(reads: Readonly<Record<string, Json>>, { nodeId }: { nodeId: string }) {
    const read = reads[METAL_MACHINE_PRELOAD_ID];
    if (typeof read !== 'object' || read === null || Array.isArray(read)) return undefined;
    const machine = read as Partial<Record<keyof PreloadedMachine, Json>>;
    if (machine.nodeId !== nodeId || typeof machine.bmcAddress !== 'string' || typeof machine.bmcDriver !== 'string') {
      return undefined;
    }
    return bmcFields(machine.bmcAddress, machine.bmcDriver, machine.bmcCredentialRef);
  },
});

function bmcFields(address: string, driver: string, credentialRef: unknown): { bmc: Json } {
  const bmc: Record<string, Json> = { address, driver };
  if (typeof credentialRef === 'string') bmc.credentialRef = credentialRef;
  return { bmc };
}
