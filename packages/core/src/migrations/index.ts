export { loadMigrations, type Migration, type MigrationSource, readMigrationFolder } from './migration';
export { applyMigrations, type MigrationReport, type ModuleMigrations } from './migrator';
