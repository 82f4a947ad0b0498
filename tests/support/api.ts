import { type ApiClient, type Compute, ComputeError, createCredential, type SqlExecutor } from 'better-compute/core';
import type { ProvisionApi } from 'better-compute/provision';
import type { FakeClock } from 'better-compute/testkit';

/** `compute.api`, typed with the provision module's groups (the kernel types it loosely). */
export function provisionApiOf(compute: Compute): ApiClient<ProvisionApi> {
  return compute.api as unknown as ApiClient<ProvisionApi>;
}

/** A bearer token of `tenantId` holding `permissions`; the tenant is created when missing. */
export async function tokenFor(
  sql: SqlExecutor,
  clock: FakeClock,
  tenantId: string,
  permissions: string[],
): Promise<string> {
  await sql.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT (id) DO NOTHING', [
    tenantId,
    clock.now(),
  ]);
  const { token } = await createCredential(sql, { tenantId, name: 'api-test', permissions, clock });
  return token;
}

/** The ComputeError a call rejected with; fails the test when it resolves or throws anything else. */
export async function apiError(call: Promise<unknown>): Promise<ComputeError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ComputeError) return error;
    throw error;
  }
  throw new Error('expected the call to fail');
}

/** A POST to the fetch handler, as an HTTP client would send it. */
export function post(compute: Compute, method: string, token: string, body: unknown): Promise<Response> {
  return compute.handler(
    new Request(`http://localhost/v1/${method}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
}
