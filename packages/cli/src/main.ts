import { CommanderError } from 'commander';
import { CliError, EXIT, formatError } from './errors';
import { buildProgram, CLI_VERSION } from './program';

/**
 * Runs the CLI on `argv` (as `process.argv`) and resolves with the exit code; never throws. Errors are one line on
 * stderr, `error: <CODE> <message> (at <path>)`, and the exit code follows the table in the README.
 *
 * @example
 * ```ts
 * process.exitCode = await main(process.argv);
 * ```
 */
export async function main(argv: readonly string[]): Promise<number> {
  // `--version` alone: handled here, so commands keep their own --version (images register, profiles get).
  const rest = argv.slice(2);
  if (rest.length === 1 && (rest[0] === '--version' || rest[0] === '-V')) {
    process.stdout.write(`${CLI_VERSION}\n`);
    return EXIT.OK;
  }
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.OK;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      ) {
        return EXIT.OK;
      }
      if (error.code === 'commander.executeSubCommandAsync') return error.exitCode;
      const message = error.message.replace(/^error: /, '');
      process.stderr.write(`error: USAGE ${message}\n(run with --help for usage)\n`);
      return EXIT.USAGE;
    }
    if (error instanceof CliError) {
      process.stderr.write(`${formatError(error)}\n`);
      return error.exitCode;
    }
    const name = error instanceof Error ? error.name : 'unknown';
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`error: INTERNAL ${name}: ${message}\n`);
    if (process.env.BETTER_COMPUTE_DEBUG && error instanceof Error) process.stderr.write(`${error.stack}\n`);
    return EXIT.INTERNAL;
  }
}

/**
 * The `better-compute` executable: {@link main} on `process.argv`, exiting 130 on Ctrl-C and quietly on a closed pipe
 * (`better-compute … | head`). The bins of @better-compute/cli and of the umbrella better-compute call it.
 *
 * @example
 * ```ts
 * #!/usr/bin/env node
 * import { runBin } from '@better-compute/cli';
 * runBin();
 * ```
 */
export function runBin(): void {
  process.on('SIGINT', () => process.exit(EXIT.INTERRUPTED));
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
      throw error;
    });
  }
  main(process.argv).then(
    (code) => {
      process.exitCode = code;
    },
    () => {
      process.exitCode = EXIT.INTERNAL;
    },
  );
}
