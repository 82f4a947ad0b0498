export type { NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from './executor';
export { classifySqlState, isSqlError, SqlError, type SqlErrorReason, toSqlError } from './sql-error';
