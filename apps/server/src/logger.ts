import type { Logger as KernelLogger, LogFields } from '@better-compute/core';
import { type Logger, pino } from 'pino';
import type { LogLevel } from './config';

/** The server's logger: pino, JSON lines on stderr (stdout carries only the start banner). */
export type ServerLogger = Logger;

// Field names whose values never reach a log line, wherever they sit (one level deep and at the top).
const SECRET_KEYS = [
  'authorization',
  'cookie',
  'token',
  'adminToken',
  'password',
  'secret',
  'secretKey',
  'privateKey',
  'privateKeyPem',
  'joinToken',
  'userData',
];

/**
 * Creates the server's logger at `level`, writing JSON lines to `destination` (default stderr, synchronously, so a
 * line written just before an exit is not lost). Values under the {@link SECRET_KEYS} names are redacted.
 *
 * @example
 * ```ts
 * const log = createLogger('info');
 * log.info({ port: 8443 }, 'listening');
 * ```
 */
export function createLogger(level: LogLevel, destination: NodeJS.WritableStream | number = 2): ServerLogger {
  const stream = typeof destination === 'number' ? pino.destination({ dest: destination, sync: true }) : destination;
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: [...SECRET_KEYS, ...SECRET_KEYS.map((key) => `*.${key}`)], censor: '[redacted]' },
    },
    stream,
  );
}

/**
 * The kernel's {@link KernelLogger} port over pino: modules' `ctx.log` lines go to the same stream, under
 * `component: 'kernel'`.
 *
 * @example
 * ```ts
 * betterCompute({ logger: kernelLogger(log) });
 * ```
 */
export function kernelLogger(log: ServerLogger): KernelLogger {
  const child = log.child({ component: 'kernel' });
  const write = (level: 'debug' | 'info' | 'warn' | 'error') => (message: string, fields?: LogFields) =>
    fields === undefined ? child[level](message) : child[level](fields, message);
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}
