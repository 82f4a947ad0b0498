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
export { decodeJsonResult, encodeResult } from './result-bytes';
export { createScratchDatabase, type ScratchDatabase, scratchBackends } from './scratch-database';
export { type SettleOptions, type SettleReport, settle } from './settle';
