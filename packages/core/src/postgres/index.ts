export { createPostgresDatabase, POSTGRES_DEFAULTS, type PostgresDatabaseOptions } from './driver';
export { PostgresSession, type PostgresSessionLimits } from './session';
