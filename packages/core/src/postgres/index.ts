export { createPostgresDatabase, type PostgresDatabaseOptions } from './driver';
export { PostgresSession } from './session';
