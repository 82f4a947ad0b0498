export { ApiClient, SUPPORTED_API_VERSIONS } from './client';
export {
  type ConfigFile,
  type Connection,
  type ContextEntry,
  configPath,
  normaliseUrl,
  readConfig,
  resolveConnection,
} from './config';
export { CliError, EXIT, exitCodeFor, formatError } from './errors';
export { main, runBin } from './main';
export { buildProgram, CLI_VERSION } from './program';
