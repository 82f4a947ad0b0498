/** Structured log fields. Never put a secret value in them. */
export type LogFields = Record<string, unknown>;

/**
 * The logger every module gets.
 *
 * @example
 * ```ts
 * ctx.log.info('workflow started', { workflowId });
 * ```
 */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/**
 * A logger that writes nothing, the default.
 *
 * @example
 * ```ts
 * betterCompute({ database, logger: silentLogger });
 * ```
 */
export const silentLogger: Logger = Object.freeze({
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
});
