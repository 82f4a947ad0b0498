import type { BetterComputeOptions, ComputeModule, SqlDatabase } from '@better-compute/core';
import { metal, metalBmcTarget } from '@better-compute/metal';
import { type Pki, pki } from '@better-compute/pki';
import { type ProvisionModule, provisionModule } from '@better-compute/provision';

/** What provision's built-in cloud-init template needs to render metal.deploy-image's user data. */
const USER_DATA = {
  controlPlaneUrl: 'https://cp.bench.example',
  bcdUrl: 'https://downloads.bench.example/bcd/0.2.0/bcd-linux-amd64',
  bcdSha256: 'b'.repeat(64),
};

/** The compute of the metal bench: metal() with its shipped profiles, provision and pki, wired as a deployment would. */
export interface MetalLabCompute {
  options: BetterComputeOptions;
  security: Pki;
  provision: ProvisionModule;
}

/**
 * `betterCompute` options for one process of the bench on `database`: the engine's (counted), the API driver's and
 * the agents' computes all use these, with the same secret key, so a secret one stores another can read.
 *
 * @example
 * ```ts
 * const { options } = metalLabCompute(database, key);
 * const compute = await betterCompute(options);
 * ```
 */
export function metalLabCompute(database: SqlDatabase, key: Buffer): MetalLabCompute {
  const security = pki({ key });
  const bareMetal = metal();
  // metal() registers its BMC driver target once its module lists it; until then it rides on a module of its own.
  const hasTarget = (bareMetal.extensions as readonly { id: string }[]).some((e) => e.id === metalBmcTarget.id);
  const target: ComputeModule[] = hasTarget ? [] : [{ id: 'bench-metal-bmc', extensions: [metalBmcTarget] }];
  const provision = provisionModule({ userData: USER_DATA, modules: [bareMetal, ...target] });
  return {
    security,
    provision,
    options: {
      database,
      modules: [security.module, provision, bareMetal, ...target],
      pki: security.port(),
      secrets: security.secrets(database),
      attestation: security.attestation(),
    },
  };
}

/** What the agents' process says once its site agent joined and its machines are racked. */
export interface ReadyMessage {
  type: 'ready';
  machines: { bmcAddress: string; bmcDriver: string; username: string; password: string; mac: string }[];
}

/** What the agents' process reports when stopped. */
export interface AgentsReport {
  type: 'report';
  /** By command id: the wall time (ms) right after its completeCommand statement committed. */
  completed: [string, number][];
  /**
   * By command id: the wall time (ms) right before its completeCommand statement was sent. The commit lies between
   * this and `completed`; the engine may react to it before the agents' process records `completed`.
   */
  completing: [string, number][];
  /** By machine node id: the wall times (ms) its agent's sessions opened after a boot (realistic model only). */
  connected: [string, number[]][];
  /** Commands handled, by kind (driver.invoke by operation). */
  byKind: [string, number][];
  errors: number;
  lastError?: string;
}
