import { createHash, randomInt } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { type ApiClient, type Compute, createCredential, isComputeError, revokeCredential } from '@better-compute/core';
import type { MetalApi, SitesApi } from '@better-compute/metal';
import { generateSigningKeyPair, type ImageSignersApi, imageSigningBytes, signToBase64Url } from '@better-compute/pki';
import type { ProvisionApi } from '@better-compute/provision';
import { createHttpSimSite, type HttpSimEnrollInput, type HttpSimSite } from '@better-compute/testkit';

// `--simulate N`: a simulated site of N machines whose site agent, ramdisks and installed OSes speak the agent API
// over HTTPS, as real ones would, so a newcomer can enroll, deploy and release machines on a laptop.

type SimulateApi = ApiClient<{ metal: MetalApi; sites: SitesApi; imageSigners: ImageSignersApi } & ProvisionApi>;

/** The demo image every simulated start registers in root's catalog (signed by a signer of its own). */
export const SIMULATED_IMAGE = Object.freeze({ name: 'ubuntu/noble', version: '24.04.1-simulated' });

/**
 * The user-data variables the built-in cloud-init template needs, for a server that simulates: the installed OS's bcd
 * would call back at `controlPlaneUrl`; the download is never fetched (the simulated OS joins by itself).
 *
 * @example
 * ```ts
 * provisionModule({ userData: simulatedUserData('https://localhost:8444'), modules: [bareMetal] });
 * ```
 */
export function simulatedUserData(agentUrl: string): { controlPlaneUrl: string; bcdUrl: string; bcdSha256: string } {
  return {
    controlPlaneUrl: agentUrl,
    bcdUrl: 'https://downloads.simulated.invalid/bcd/bcd-linux-amd64',
    bcdSha256: createHash('sha256').update('simulated bcd').digest('hex'),
  };
}

/** What {@link startSimulatedSite} takes. */
export interface SimulatedSiteOptions {
  compute: Compute;
  /**
   * A root credential with `compute:*` (the admin token). Without it (a later start prints none), the site mints one
   * of its own for its calls, never shown, and revokes it on `close()`.
   */
  adminToken?: string;
  /** The agent API's origin, e.g. `https://localhost:8444`. */
  agentUrl: string;
  /** The PEM the agent API's certificate chains to (`./data/tls/ca.crt`). */
  ca: string;
  /** How many machines. */
  machines: number;
  /** Enroll them too (they then go on to `available` by themselves); default false, the newcomer enrolls. */
  enroll?: boolean;
  /** Writes the `metal.enroll` bodies there (a JSON array, mode 0600: it holds the simulated BMC passwords). */
  enrollFile?: string;
  /** How long a simulated boot takes (default 1,000 ms). */
  bootMs?: number;
  /** Where the simulated agents report a refused join or a failed poll. */
  log?: (message: string) => void;
}

/** A started simulated site. */
export interface SimulatedSite {
  siteId: string;
  /** The demo image's ref, for `metal.deploy` with `profileId: 'metal.deploy-image'`. */
  imageRef: string;
  /** One `metal.enroll` body per machine. */
  enrollBodies: HttpSimEnrollInput[];
  /** The node ids, when `enroll` was set. */
  nodeIds: string[];
  /** Lines for the start banner: the site, the image and how to enroll. */
  banner: string[];
  site: HttpSimSite;
  close(): Promise<void>;
}

async function ensureDemoImage(api: SimulateApi, adminToken: string): Promise<string> {
  const ref = `${SIMULATED_IMAGE.name}@${SIMULATED_IMAGE.version}`;
  try {
    await api.images.get(adminToken, { tenantId: 'root', ref });
    return ref; // registered by an earlier simulated start on this database
  } catch (error) {
    if (!isComputeError(error, 'NOT_FOUND')) throw error;
  }
  const key = generateSigningKeyPair('ed25519');
  await api.imageSigners.add(adminToken, {
    tenantId: 'root',
    name: `simulated-site ${new Date().toISOString()}`,
    publicKey: key.publicKeyPem,
  });
  const digest = `sha256:${createHash('sha256').update(ref).digest('hex')}`;
  await api.images.register(adminToken, {
    tenantId: 'root',
    ...SIMULATED_IMAGE,
    digest,
    signature: signToBase64Url(key.privateKeyPem, imageSigningBytes(digest)),
    url: `https://images.simulated.invalid/${SIMULATED_IMAGE.name}/${SIMULATED_IMAGE.version}.img`,
  });
  return ref;
}

/**
 * Starts a simulated site against this server: a new site of root (`sites.create`), its join token
 * (`sites.joinToken`), a demo image signed by a new allowlisted signer (`imageSigners.add`, `images.register`; kept
 * from an earlier start on the same database), and `createHttpSimSite` with `machines` machines whose agents speak
 * the agent API at `agentUrl`. The machines' numbers start at a random offset, so their MACs and BMC addresses do not
 * collide with a previous start's (the simulated machines live in memory; their nodes stay in the database).
 *
 * @example
 * ```ts
 * const sim = await startSimulatedSite({ compute, adminToken, agentUrl, ca, machines: 8 });
 * for (const body of sim.enrollBodies) await compute.api.metal.enroll(adminToken, body);
 * ```
 */
export async function startSimulatedSite(options: SimulatedSiteOptions): Promise<SimulatedSite> {
  const { compute } = options;
  const api = compute.api as unknown as SimulateApi;
  const { clock } = compute.context;
  const own = options.adminToken
    ? undefined
    : await createCredential(compute.database, {
        tenantId: 'root',
        name: 'simulated-site',
        permissions: ['compute:*'],
        clock,
      });
  const adminToken = options.adminToken ?? (own?.token as string);
  const revoke = async () => {
    if (own) await compute.database.transaction((tx) => revokeCredential(tx, own.id, clock));
  };
  try {
    return await start(options, api, adminToken, revoke);
  } catch (error) {
    await revoke().catch(() => undefined);
    throw error;
  }
}

async function start(
  options: SimulatedSiteOptions,
  api: SimulateApi,
  adminToken: string,
  revoke: () => Promise<void>,
): Promise<SimulatedSite> {
  const { compute, machines } = options;
  const imageRef = await ensureDemoImage(api, adminToken);
  const created = await api.sites.create(adminToken, { tenantId: 'root', name: `simulated-${Date.now()}` });
  const { token } = await api.sites.joinToken(adminToken, { tenantId: 'root', siteId: created.id });
  const isDestructive = (kind: string) => compute.context.commandKinds.get(kind)?.definition.destructive === true;
  const site = await createHttpSimSite({
    agentUrl: options.agentUrl,
    ca: options.ca,
    siteJoinToken: token,
    machines,
    firstIndex: 1 + 16 * randomInt(0, 3_000),
    isDestructive,
    ...(options.bootMs === undefined ? {} : { bootMs: options.bootMs }),
    ...(options.log ? { log: options.log } : {}),
  });
  try {
    const enrollBodies = site.enrollInputs();
    if (options.enrollFile) {
      await writeFile(options.enrollFile, `${JSON.stringify(enrollBodies, null, 2)}\n`, { mode: 0o600 });
    }
    const nodeIds: string[] = [];
    if (options.enroll) {
      for (const body of enrollBodies) nodeIds.push((await api.metal.enroll(adminToken, body)).nodeId);
    }
    const banner = [
      `  simulated    site ${created.id}: ${machines} machines, image ${imageRef}`,
      options.enroll
        ? `               enrolled: ${nodeIds.join(' ')}`
        : `               enroll bodies${options.enrollFile ? ` in ${options.enrollFile}` : ': metal.enroll, one per machine'}`,
    ];
    const close = async () => {
      await site.close();
      await revoke();
    };
    return { siteId: created.id, imageRef, enrollBodies, nodeIds, banner, site, close };
  } catch (error) {
    await site.close();
    throw error;
  }
}
