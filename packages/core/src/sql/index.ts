export type { Notification, NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from './executor';
export { sendNotifications } from './notifications';
export { classifySqlState, isSqlError, SqlError, type SqlErrorReason, toSqlError } from './sql-error';
