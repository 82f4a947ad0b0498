import { createHash, randomBytes } from 'node:crypto';
import {
  type ApiClient,
  betterCompute,
  type Clock,
  type Compute,
  type ComputeModule,
  createCredential,
  type LogFields,
  type Logger,
  type SqlDatabase,
} from '@better-compute/core';
import { createPgliteDatabase } from '@better-compute/core/pglite';
import {
  type MachineView,
  type MetalApi,
  type MetalOptions,
  metal,
  metalBmcTarget,
  type SitesApi,
} from '@better-compute/metal';
import {
  generateSigningKeyPair,
  imageSigningBytes,
  type Pki,
  pki,
  type QuorumConfig,
  type SecretKeyInput,
  type SigningKeyPair,
  signToBase64Url,
} from '@better-compute/pki';
import {
  type Profile,
  type ProvisionApi,
  type ProvisionModule,
  type ProvisionOptions,
  provisionModule,
  type Step,
} from '@better-compute/provision';
import { type CrashingDatabase, type CrashPlan, crashingDatabase, isWorkerCrashed } from '../crash';
import { createFakeClock, type FakeClock } from '../fake-clock';
import { type SettleReport, settle } from '../settle';
import {
  type BootEntry,
  createMachine,
  type InstallHook,
  type MachineInternals,
  type SimMachine,
  type SimMachineSpec,
} from './machine';
import { createSimAgent, type SimAgent, type SimCommandRecord, type SimOutcome } from './sim-agent';
import { siteCommand, takeBootEntry } from './site-commands';

/** What {@link createMetalSim} takes; everything is optional. */
export interface MetalSimOptions {
  /** Your modules: listed in `betterCompute({ modules })` and in `provisionModule({ modules })`. */
  modules?: readonly ComputeModule[];
  /** Your plugins (`definePlugin`): listed in `betterCompute({ plugins })` and in `provisionModule({ modules })`. */
  plugins?: readonly ComputeModule[];
  /** Steps and profiles provision registers as its own (`provisionModule({ steps, profiles })`). */
  steps?: readonly Step[];
  profiles?: readonly Profile[];
  /** What an image or an installer ISO boots (see `InstallHook`); default `defaultInstall`. */
  install?: InstallHook;
  /** Provision's other options (user-data templates and variables, config units, an image verifier). */
  provision?: Omit<ProvisionOptions, 'steps' | 'profiles' | 'modules'>;
  /** metal()'s options (phase profiles). */
  metal?: MetalOptions;
  /** The destructive-batch quorum (pki's `quorum`). */
  quorum?: QuorumConfig;
  /**
   * Default: a fresh in-memory PGlite, closed by `sim.close()`. Any other handle works too (a PostgreSQL database's,
   * for workers in other processes: see {@link metalSimWorker}); the simulation never closes a handle it was given.
   */
  database?: SqlDatabase;
  /** Default: `createFakeClock()`. */
  clock?: FakeClock;
  /**
   * pki's 32-byte at-rest key (64 hex digits, base64 or bytes). Default: a random one. Give the same key to a
   * {@link metalSimWorker} in another process, so it reads the secrets the simulation stored (boot-entry tokens, BMC
   * credentials, user data) and the simulation's agents read the ones it stores.
   */
  key?: SecretKeyInput;
  /** Where the compute logs; every line is also kept in `sim.logs`. */
  logger?: Logger;
}

/** The API groups the simulation's compute serves, typed. */
export type MetalSimApi = ApiClient<{ metal: MetalApi; sites: SitesApi } & ProvisionApi>;

/** A site of the simulation: its id, its site agents and the PXE boot entries they hold. */
export interface SimSite {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
  /** Its site agents, in the order they joined. */
  readonly agents: readonly SimAgent[];
  /** The boot entries the site's agents hold, by MAC (the token is the agent's, never shown here). */
  readonly bootEntries: readonly string[];
  /** Another site agent joins the site (a join token from `sites.joinToken`, then a session). */
  addAgent(): Promise<SimAgent>;
  /** Its agents (or one) stop polling and touching their sessions, as a lost network would make them. */
  offline(agent?: SimAgent): void;
  /** They come back: polling again, with a new session when theirs was closed meanwhile. */
  online(agent?: SimAgent): Promise<void>;
}

/** A worker that dies at a planned transaction boundary (see `sim.worker`). */
export interface SimWorker {
  readonly compute: Compute;
  readonly database: CrashingDatabase;
  /** Boundaries it crossed since its start-up (its own migrations and init not counted). */
  readonly boundaries: number;
  close(): Promise<void>;
}

/**
 * What {@link metalSimWorker} takes: the simulation's options that shape its compute (the same modules, plugins, steps,
 * profiles, provision, metal and quorum options as the simulation's), and the database, pki key and clock it shares.
 */
export interface MetalSimWorkerOptions extends Omit<MetalSimOptions, 'database' | 'clock' | 'key' | 'install'> {
  /** The simulation's database (its PostgreSQL database, through a handle of this process). */
  database: SqlDatabase;
  /** The simulation's pki key (`MetalSimOptions.key`). */
  key: SecretKeyInput;
  /** A clock that follows the simulation's (its fake clock's time, sent over by the test). */
  clock: Clock;
}

/** What {@link MetalSim.settle} takes. */
export interface MetalSimSettleOptions {
  /**
   * Run the work with this worker until it dies, then with the simulation's own compute (a fresh worker). A
   * {@link SimWorker}, or anything that runs due work on the simulation's database (a worker in another process,
   * whose `runDueWork` throws `WorkerCrashed` once that process is gone).
   */
  worker?: { readonly compute: Pick<Compute, 'runDueWork' | 'database'> };
  /** How far the clock may move (default 24 h). */
  horizonMs?: number;
}

/** A simulated site of bare-metal machines around a real `betterCompute` (see {@link createMetalSim}). */
export interface MetalSim {
  readonly compute: Compute;
  readonly clock: FakeClock;
  readonly database: SqlDatabase;
  /** The pki the compute is wired with (ports, secrets, attestation). */
  readonly security: Pki;
  /** `compute.api`, typed with the metal, sites, profiles, workflows and images groups. */
  readonly api: MetalSimApi;
  /** A root credential holding `compute:*`. */
  readonly token: string;
  readonly sites: readonly SimSite[];
  readonly machines: readonly SimMachine[];
  /** Every command an agent of the simulation ran (site agents, ramdisks, OSes), in order. */
  readonly commands: readonly SimCommandRecord[];
  /** Every line the compute logged, as JSON text. */
  readonly logs: readonly string[];
  /**
   * Every secret value an agent fetched through a command's reference (boot-entry tokens, user data, BMC
   * credentials), for a test that proves none of them was stored or logged in clear.
   */
  readonly fetchedSecrets: readonly string[];
  /** A site with one site agent joined (tenant `root` by default). */
  addSite(input?: { name?: string; tenantId?: string }): Promise<SimSite>;
  /** A machine racked in `site`, powered off, not enrolled. */
  addMachine(site: SimSite, spec?: SimMachineSpec): SimMachine;
  /** Enrolls a machine through `metal.enroll` (its BMC, credentials and first MAC); it goes on to `available`. */
  enroll(
    machine: SimMachine,
    extra?: { labels?: Record<string, string>; pool?: string; name?: string; holdAfter?: 'enrolling' | 'inspecting' },
  ): Promise<MachineView>;
  /** The machine as `metal.get` shows it. */
  get(machine: SimMachine | string): Promise<MachineView>;
  /** Registers a signed image `name@version` in a tenant's catalog (default root) and returns its ref. */
  addImage(input: {
    name: string;
    version: string;
    url?: string;
    tenantId?: string;
    public?: boolean;
  }): Promise<string>;
  /**
   * Runs due work, polls every agent, and moves the clock to the next due item until nothing is due (see the
   * testkit's `settle`).
   */
  settle(options?: MetalSimSettleOptions): Promise<SettleReport>;
  /** A second worker on the same database that dies at `plan` (boundaries counted from after its start-up). */
  worker(plan?: CrashPlan): Promise<SimWorker>;
  close(): Promise<void>;
}

function recordingLogger(lines: string[], inner: Logger | undefined): Logger {
  const write = (level: 'debug' | 'info' | 'warn' | 'error') => (message: string, fields?: LogFields) => {
    lines.push(JSON.stringify({ level, message, fields }));
    inner?.[level](message, fields);
  };
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}

/**
 * The composition a simulation's compute is built from: pki with `key`, metal, provision listing metal and the
 * caller's modules and plugins. `build(sql)` makes a compute on a database handle; every compute it builds shares the
 * same pki and module instances.
 */
function composeSim(
  options: Omit<MetalSimOptions, 'database' | 'clock' | 'key' | 'logger' | 'install'>,
  wiring: { key: SecretKeyInput; clock: Clock; logger?: Logger },
) {
  const { clock, logger } = wiring;
  const security = pki({ key: wiring.key, clock, ...(options.quorum ? { quorum: options.quorum } : {}) });
  const bareMetal = metal(options.metal ?? {});
  // metal() registers its driver target once its module lists it; until then it rides on a module of its own.
  const hasTarget = (bareMetal.extensions as readonly { id: string }[]).some((e) => e.id === metalBmcTarget.id);
  const target: ComputeModule[] = hasTarget ? [] : [{ id: 'metal-sim-bmc', extensions: [metalBmcTarget] }];
  const own = [...(options.modules ?? []), ...target];
  const plugins = options.plugins ?? [];

  let images: ProvisionModule['images'] | undefined;
  const build = (sql: SqlDatabase) => {
    const provision = provisionModule({
      ...(options.provision ?? {}),
      ...(options.steps ? { steps: options.steps } : {}),
      ...(options.profiles ? { profiles: options.profiles } : {}),
      modules: [bareMetal, ...own, ...plugins],
    });
    images ??= provision.images;
    return betterCompute({
      database: sql,
      clock,
      ...(logger ? { logger } : {}),
      modules: [security.module, provision, bareMetal, ...own],
      ...(plugins.length > 0 ? { plugins } : {}),
      pki: security.port(),
      secrets: security.secrets(sql),
      attestation: security.attestation(),
    });
  };
  return { security, build, images: () => images };
}

/**
 * A compute built as {@link createMetalSim} builds its own (the same modules, and pki with the simulation's `key`) on
 * another handle of the simulation's database: a worker in another process, which a test can kill (SIGKILL) while
 * the simulation's agents, in the test's process, go on answering. Run its work with `runDueWork()` when the test
 * says, on a clock that follows the simulation's fake clock; nothing runs by itself. It writes no rows of its own
 * besides what `betterCompute` does at start-up (migrations already applied are skipped).
 *
 * @example
 * ```ts
 * // the test: const sim = await createMetalSim({ database, key }); … then, in the worker's process:
 * let now = Number(process.env.SIM_NOW);
 * const worker = await metalSimWorker({ database: createPostgresDatabase({ url }), key, clock: { now: () => new Date(now) } });
 * process.on('message', async (m) => { now = m.now; process.send?.({ moved: await worker.runDueWork() }); });
 * ```
 */
export function metalSimWorker(options: MetalSimWorkerOptions): Promise<Compute> {
  const { database, key, clock, logger, ...rest } = options;
  return composeSim(rest, { key, clock, ...(logger ? { logger } : {}) }).build(database);
}

const failed = (reason: string): SimOutcome => ({ outcome: 'fail', reason });

/**
 * A simulated site around a real `betterCompute` on PGlite with a fake clock: `metal()` and `provisionModule` (with
 * your modules, plugins, steps and profiles) and pki wired as the ports (`pki`, `secrets`, `attestation`); sites with
 * a site agent that answers `driver.invoke`, `site.bootEntry` and `site.httpProxy` from each machine's BMC (power,
 * boot device, one-time boot, virtual media); machines that PXE-boot a ramdisk joining with its boot entry's token,
 * report their inventory, write images and sign their wipes with their own key; an installed OS that rejoins with a
 * new boot id after a kexec or a reboot (or Talos, answering on port 50000); fault switches per machine and site; and
 * crash injection through `worker(plan)`. Agents act through the kernel's session and command-queue functions, as
 * the agent API does.
 *
 * @example
 * ```ts
 * const sim = await createMetalSim({ plugins: [acme], install });
 * const site = await sim.addSite();
 * const machine = sim.addMachine(site, { gpus: [{ model: 'H100' }] });
 * await sim.enroll(machine);
 * await sim.settle();
 * (await sim.get(machine)).state; // 'available'
 * ```
 */
export async function createMetalSim(options: MetalSimOptions = {}): Promise<MetalSim> {
  const ownsDatabase = options.database === undefined;
  const database = options.database ?? (await createPgliteDatabase());
  const clock = options.clock ?? createFakeClock();
  const logs: string[] = [];
  const logger = recordingLogger(logs, options.logger);
  const composed = composeSim(options, { key: options.key ?? randomBytes(32), clock, logger });
  const { security, build } = composed;

  const compute = await build(database);
  const api = compute.api as unknown as MetalSimApi;
  await database.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT (id) DO NOTHING', [
    'root',
    clock.now(),
  ]);
  const { token } = await createCredential(database, {
    tenantId: 'root',
    name: 'metal-sim',
    permissions: ['compute:*'],
    clock,
  });

  const sites: SimSiteInternals[] = [];
  const machines: MachineInternals[] = [];
  const commands: SimCommandRecord[] = [];
  const record = (entry: SimCommandRecord) => commands.push(entry);
  const isDestructive = (kind: string) => compute.context.commandKinds.get(kind)?.definition.destructive === true;
  const fetched: string[] = [];
  const fetchSecret = async (agentNodeId: string, ref: string, commandId: string) => {
    const value = await security.fetchSecretForAgent(database, { agentNodeId, ref, commandId });
    fetched.push(value);
    return value;
  };
  let imageSigner: { key: SigningKeyPair; id: string } | undefined;
  let startup: number | undefined;

  interface SimSiteInternals extends SimSite {
    entries: Map<string, BootEntry>;
    agentList: SimAgent[];
  }

  async function joinSiteAgent(site: SimSiteInternals): Promise<SimAgent> {
    const joinToken = await api.sites.joinToken(token, { tenantId: site.tenantId, siteId: site.id });
    const key = generateSigningKeyPair('ed25519');
    const joined = await database.transaction((tx) =>
      security.joinAgent(tx, { token: joinToken.token, publicKey: key.publicKeyPem }),
    );
    const agent = createSimAgent({
      compute,
      clock,
      nodeId: joined.nodeId,
      isDestructive,
      record,
      handle: (command, self) =>
        siteCommand(
          {
            siteId: site.id,
            machines: () => machines,
            entries: site.entries,
            fetchSecret: (ref, commandId) => fetchSecret(self.nodeId, ref, commandId),
          },
          command,
        ),
    });
    await agent.connect('site');
    site.agentList.push(agent);
    return agent;
  }

  const sim: MetalSim = {
    compute,
    clock,
    database,
    security,
    api,
    token,
    get sites() {
      return [...sites];
    },
    get machines() {
      return [...machines];
    },
    get commands() {
      return commands.map((c) => ({ ...c }));
    },
    get logs() {
      return [...logs];
    },
    get fetchedSecrets() {
      return [...fetched];
    },
    async addSite(input = {}) {
      const tenantId = input.tenantId ?? 'root';
      await database.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT DO NOTHING', [
        tenantId,
        clock.now(),
      ]);
      const created = await api.sites.create(token, { tenantId, name: input.name ?? `site-${sites.length + 1}` });
      const site: SimSiteInternals = {
        id: created.id,
        tenantId,
        name: created.name,
        entries: new Map(),
        agentList: [],
        get agents() {
          return [...this.agentList];
        },
        get bootEntries() {
          return [...this.entries.keys()];
        },
        addAgent: () => joinSiteAgent(site),
        offline(agent) {
          for (const a of agent ? [agent] : site.agentList) a.online = false;
        },
        async online(agent) {
          for (const a of agent ? [agent] : site.agentList) {
            a.online = true;
            // A session closed meanwhile (or gone stale) is replaced by a new one, as a reconnecting agent would.
            if (!a.session || (await a.poll().then(() => !a.session))) await a.connect('site');
          }
        },
      };
      sites.push(site);
      await joinSiteAgent(site);
      return site;
    },
    addMachine(site, spec = {}) {
      const internals = sites.find((s) => s.id === site.id);
      if (!internals) throw new Error(`metal sim: site ${site.id} is not a site of this simulation`);
      const machine = createMachine(machines.length + 1, site.id, spec, {
        security,
        sql: database,
        install: options.install,
        fetchSecret,
        takeBootEntry: (macs) => takeBootEntry(internals.entries, macs),
        log: (message) => logger.info(`metal-sim: ${message}`),
        elapse: (ms) => clock.advance(ms),
      });
      machines.push(machine);
      return machine;
    },
    async enroll(machine, extra = {}) {
      const internals = machines.find((m) => m === machine);
      const site = sites.find((s) => s.id === machine.siteId);
      if (!internals || !site) throw new Error('metal sim: not a machine of this simulation');
      const { bmcCredentials, bmcAddress, bmcDriver, macs } = machine.spec;
      const view = await api.metal.enroll(token, {
        tenantId: site.tenantId,
        siteId: site.id,
        bmc: { address: bmcAddress, driver: bmcDriver, ...(bmcCredentials ?? {}) },
        macs: [macs[0] as string],
        ...extra,
      });
      internals.nodeId = view.nodeId;
      internals.attachAgent(
        createSimAgent({
          compute,
          clock,
          nodeId: view.nodeId,
          isDestructive,
          record,
          async handle(command) {
            const fault = internals.takeFault(command);
            if (fault) return fault.hang ? { outcome: 'hang' } : failed(fault.reason ?? 'simulated failure');
            return internals.agentCommand(command);
          },
        }),
      );
      return view;
    },
    async get(machine) {
      const nodeId = typeof machine === 'string' ? machine : machine.nodeId;
      if (!nodeId) throw new Error('metal sim: the machine is not enrolled');
      const tenantId =
        typeof machine === 'string' ? 'root' : (sites.find((s) => s.id === machine.siteId)?.tenantId ?? 'root');
      return api.metal.get(token, { tenantId, nodeId });
    },
    async addImage(input) {
      const tenantId = input.tenantId ?? 'root';
      if (!imageSigner) {
        const key = generateSigningKeyPair('ed25519');
        const { id } = await database.transaction((tx) =>
          security.addImageSigner(tx, { tenantId: null, public: true, name: 'metal-sim', publicKey: key.publicKeyPem }),
        );
        imageSigner = { key, id };
      }
      const ref = `${input.name}@${input.version}`;
      const digest = `sha256:${createHash('sha256').update(ref).digest('hex')}`;
      const catalog = composed.images();
      if (!catalog) throw new Error('metal sim: the provision module has no image catalog');
      await database.transaction((tx) =>
        catalog.register(tx, {
          tenantId,
          name: input.name,
          version: input.version,
          digest,
          signature: signToBase64Url(imageSigner!.key.privateKeyPem, imageSigningBytes(digest)),
          url: input.url ?? `https://images.sim/${input.name}/${input.version}.img`,
          ...(input.public === undefined ? {} : { public: input.public }),
        }),
      );
      return ref;
    },
    async settle(settleOptions = {}) {
      const agents = () => [
        ...sites.flatMap((s) => s.agentList),
        ...machines.flatMap((m) => (m.nodeId ? [m.agent] : [])),
      ];
      const horizon = settleOptions.horizonMs === undefined ? {} : { horizonMs: settleOptions.horizonMs };
      if (settleOptions.worker) {
        try {
          await settle(settleOptions.worker.compute, { clock, agents: agents(), ...horizon });
        } catch (error) {
          if (!isWorkerCrashed(error)) throw error;
        }
      }
      return settle(compute, { clock, agents: agents(), ...horizon });
    },
    async worker(plan) {
      if (startup === undefined) {
        const counting = crashingDatabase(database, undefined);
        const probe = await build(counting);
        startup = counting.boundaries;
        await probe.close();
      }
      const crashing = crashingDatabase(database, plan && { ...plan, at: plan.at + startup });
      const workerCompute = await build(crashing);
      const base = startup;
      return {
        compute: workerCompute,
        database: crashing,
        get boundaries() {
          return crashing.boundaries - base;
        },
        close: () => workerCompute.close(),
      };
    },
    async close() {
      await compute.close();
      if (ownsDatabase) await database.close();
    },
  };
  return sim;
}
