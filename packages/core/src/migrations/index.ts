export {
  loadMigrations,
  type Migration,
  type MigrationSource,
  readMigrationFolder,
  splitStatements,
} from './migration';
export { applyMigrations, type MigrationReport, type ModuleMigrations } from './migrator';
