export { type Bind, bindParams } from './bind-params';
export type { NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from './executor';
export { type RetryOptions, transactionWithRetry } from './retry';
export {
  classifySqlState,
  isSqlError,
  SqlError,
  type SqlErrorInit,
  type SqlErrorReason,
  toSqlError,
} from './sql-error';
