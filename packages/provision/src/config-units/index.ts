export { applyHostConfig, HOST_CONFIG_ERROR_STEP, type HostConfigWorkflowError } from './apply';
export { BUILTIN_CONFIG_UNITS } from './builtins';
export { BUILTIN_CONFIG_UNIT_REGISTRY, CONFIG_UNIT_NAME_PATTERN, createConfigUnitRegistry } from './registry';
export { hostConfigIssues, resolveHostSection } from './resolve';
export {
  checkStringMap,
  refineSettings,
  type SettingsCheck,
  type SettingsIssue,
  type SettingsSchema,
  type StringMapRules,
  settled,
  stringMapJsonSchema,
} from './settings-schema';
export type { ConfigUnit, ConfigUnitRegistry, HostSection, HostSectionUnit } from './types';
