export * from './api';
export * from './config-units';
export * from './define';
export * from './doctor';
export * from './engine';
export * from './images';
export { provisionMigrationsFolder } from './migrations-folder';
export {
  BUILTIN_TENANT,
  type FoundProfile,
  findProfile,
  markProfileUsed,
  type ShippedProfiles,
  type StoreProfileInput,
  storeProfile,
} from './profiles/profile-store';
export { type ProvisionModule, type ProvisionOptions, provisionModule } from './provision-module';
export { type AwaitCommandInput, type AwaitedCommand, awaitCommand, awaitCommands } from './steps/await-command';
export { buildProvisionSteps, builtinSteps } from './steps/builtin-steps';
export { siteAgentFor } from './steps/site-agent-for';
export { agentStepCommandKey, stepCommandKey } from './steps/step-command-key';
export { DEFAULT_USER_DATA_TOKEN_TTL_SECONDS, userDataRenderKey, userDataRenderStep } from './steps/userdata-render';
export { requireStepNode, waitAgentJoined } from './steps/wait-agent-joined';
export { waitObservedGeneration } from './steps/wait-observed-generation';
export * from './user-data';
