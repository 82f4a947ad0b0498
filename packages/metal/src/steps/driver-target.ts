import type { Json, SqlExecutor } from '@better-compute/core';
import type { DriverTarget } from '@better-compute/provision';

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
    if (!row) return undefined;
    const credentialRef = typeof row.bmc_credential_ref === 'string' ? row.bmc_credential_ref : undefined;
    const bmc: Json = { address: row.bmc_address, driver: row.bmc_driver, ...(credentialRef ? { credentialRef } : {}) };
    return { bmc };
  },
});
