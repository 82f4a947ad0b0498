export * from './define';
export * from './engine';
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
export { type AwaitCommandInput, type AwaitedCommand, awaitCommand } from './steps/await-command';
export { siteAgentFor } from './steps/site-agent-for';
export { agentStepCommandKey, stepCommandKey } from './steps/step-command-key';
