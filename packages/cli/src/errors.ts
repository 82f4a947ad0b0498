/**
 * The exit codes of `better-compute`, one per kind of outcome (the table in the README).
 *
 * @example
 * ```ts
 * process.exitCode = EXIT.NOT_FOUND; // 3
 * ```
 */
export const EXIT = Object.freeze({
  OK: 0,
  /** The server failed (INTERNAL and the other 5xx codes), or the CLI did. */
  INTERNAL: 1,
  /** Bad flags or arguments, a missing or malformed file, input the server refused as INVALID_INPUT. */
  USAGE: 2,
  NOT_FOUND: 3,
  /** CONFLICT, INVALID_STATE: the machine or workflow is not in a state that allows it. */
  CONFLICT: 4,
  /** UNAUTHENTICATED (the token is refused) or PERMISSION_DENIED. */
  REFUSED: 5,
  /** No answer: connection refused, DNS, TLS verification, timeout. */
  UNREACHABLE: 6,
  /** The server speaks an API version this CLI does not. */
  INCOMPATIBLE: 7,
  /** A watched workflow ended `failed`. */
  WORKFLOW_FAILED: 8,
  /** A watched workflow ended `cancelled`. */
  WORKFLOW_CANCELLED: 9,
  /** `doctor --fail-on`: a finding at or above the threshold. */
  FINDINGS: 10,
  /** Interrupted (Ctrl-C). */
  INTERRUPTED: 130,
});

const EXIT_BY_SERVER_CODE: Record<string, number> = {
  INVALID_INPUT: EXIT.USAGE,
  INVALID_CONFIG: EXIT.USAGE,
  NOT_FOUND: EXIT.NOT_FOUND,
  CONFLICT: EXIT.CONFLICT,
  INVALID_STATE: EXIT.CONFLICT,
  COMMAND_CANCELLED: EXIT.CONFLICT,
  UNAUTHENTICATED: EXIT.REFUSED,
  PERMISSION_DENIED: EXIT.REFUSED,
  USAGE: EXIT.USAGE,
  UNREACHABLE: EXIT.UNREACHABLE,
  INCOMPATIBLE: EXIT.INCOMPATIBLE,
};

/** The exit code for an error code: the server's closed list, and the CLI's own USAGE, UNREACHABLE, INCOMPATIBLE. */
export function exitCodeFor(code: string): number {
  return EXIT_BY_SERVER_CODE[code] ?? EXIT.INTERNAL;
}

/**
 * An error the CLI reports as `error: <CODE> <message>` (plus the offending path) and exits with its code.
 *
 * @example
 * ```ts
 * throw new CliError('USAGE', 'cannot read profile.yaml: no such file', { path: ['-f'] });
 * ```
 */
export class CliError extends Error {
  readonly code: string;
  readonly path: readonly (string | number)[] | undefined;
  readonly details: Record<string, unknown>;
  readonly exitCode: number;

  constructor(
    code: string,
    message: string,
    options: { path?: readonly (string | number)[]; details?: Record<string, unknown>; exitCode?: number } = {},
  ) {
    super(message);
    this.name = 'CliError';
    this.code = code;
    this.path = options.path;
    this.details = options.details ?? {};
    this.exitCode = options.exitCode ?? exitCodeFor(code);
  }
}

/** A usage error: exit 2. */
export function usage(message: string, path?: readonly (string | number)[]): CliError {
  return new CliError('USAGE', message, path ? { path } : {});
}

/** The one line an error is reported as on stderr. */
export function formatError(error: CliError): string {
  const path = error.path && error.path.length > 0 ? ` (at ${error.path.join('.')})` : '';
  return `error: ${error.code} ${error.message}${path}`;
}
