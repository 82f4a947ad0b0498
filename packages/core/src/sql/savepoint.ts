import type { SqlExecutor } from './executor';

let counter = 0;

/**
 * Runs `fn` inside a savepoint of an open transaction: released when `fn` resolves, rolled back to when it throws.
 * Backends whose driver has no savepoint API of its own use this.
 */
export async function runInSavepoint<T>(tx: SqlExecutor, fn: () => Promise<T>): Promise<T> {
  counter += 1;
  const name = `bc_sp_${counter}`;
  await tx.query(`SAVEPOINT ${name}`);
  try {
    const result = await fn();
    await tx.query(`RELEASE SAVEPOINT ${name}`);
    return result;
  } catch (err) {
    await tx.query(`ROLLBACK TO SAVEPOINT ${name}`);
    throw err;
  }
}
