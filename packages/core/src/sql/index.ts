export type { Notification, NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from './executor';
export { notificationParams, notificationsOn, notifySql, sendNotifications } from './notifications';
export { classifySqlState, isSqlError, SqlError, type SqlErrorReason, toSqlError } from './sql-error';
