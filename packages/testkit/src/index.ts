export {
  type CrashingDatabase,
  type CrashPlan,
  commitsOnItsOwn,
  crashingDatabase,
  isWorkerCrashed,
  WorkerCrashed,
} from './crash';
export {
  type AgentBehavior,
  type AgentResponder,
  type AnsweredCommand,
  createFakeAgent,
  type FakeAgent,
  type FakeAgentOptions,
} from './fake-agent';
export { createFakeClock, type FakeClock } from './fake-clock';
export { type InsertNodeInput, type InsertSiteInput, insertNode, insertSite } from './fixtures';
export {
  createHttpAgent,
  type HttpAgent,
  type HttpAgentCertificate,
  type HttpAgentCompletion,
  type HttpAgentOptions,
  type HttpAgentSession,
} from './http-agent';
export {
  createHttpSimSite,
  type HttpSimEnrollInput,
  type HttpSimSite,
  type HttpSimSiteOptions,
} from './http-site/create-http-sim-site';
export { createHttpSimAgent, type HttpSimAgent, type HttpSimAgentOptions } from './http-site/http-sim-agent';
export { type ServeAgentApiOptions, type ServedAgentApi, serveAgentApi } from './http-site/serve-agent-api';
export {
  createInMemoryCommandQueue,
  type InMemoryCommandQueue,
  type InMemoryCommandQueueOptions,
  type SucceedCommandInput,
} from './in-memory-command-queue';
export {
  createInMemoryWorkQueue,
  type InMemoryWorkItem,
  type InMemoryWorkQueue,
} from './in-memory-work-queue';
export {
  createMetalSim,
  type MetalSim,
  type MetalSimApi,
  type MetalSimOptions,
  type MetalSimSettleOptions,
  type MetalSimWorkerOptions,
  metalSimWorker,
  type SimSite,
  type SimWorker,
} from './metal-sim/create-metal-sim';
export {
  type BootEntry,
  createMachine,
  defaultInstall,
  type FaultMatch,
  type InstallHook,
  type InstallPlan,
  type InstallSource,
  joinTokenIn,
  type MachineEnvironment,
  type MachineFaults,
  type MachineIdentity,
  type MachineInternals,
  type SimBmc,
  type SimDisk,
  type SimHttpHandler,
  type SimMachine,
  type SimMachineSpec,
  type SimRunning,
} from './metal-sim/machine';
export type { SimAgent, SimCommandRecord, SimOutcome } from './metal-sim/sim-agent';
export { type SiteCommandContext, siteCommand, takeBootEntry } from './metal-sim/site-commands';
export { decodeJsonResult, encodeResult } from './result-bytes';
export { createScratchDatabase, type ScratchDatabase, scratchBackends } from './scratch-database';
export { type SettleOptions, type SettleReport, settle } from './settle';
