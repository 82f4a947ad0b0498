import * as v from 'valibot';
import { ComputeError, isComputeError } from '../errors';
import type { Finding } from '../kernel/findings';
import type { ComputeModule, ModuleContext } from '../kernel/module';
import { defineApiGroup, defineApiMethod } from './define';
import { textSchema } from './inputs';
import { ROOT_TENANT_ID } from './permissions';
import { resolveTenantResource } from './resources';

/** One module's findings, as `doctor.findings` answers them. */
export interface ModuleFindings {
  moduleId: string;
  findings: Finding[];
}

/** What `doctor.findings` answers: every module with a findings provider, in registration order. */
export interface DoctorReport {
  modules: ModuleFindings[];
}

/** The finding a provider that throws becomes. */
export const PROVIDER_FAILED_FINDING = 'doctor-provider-failed';

function failedFinding(moduleId: string, error: unknown): Finding {
  // The error's name and code only: its message may carry a secret or an internal detail.
  const name = error instanceof Error ? error.name : typeof error;
  return {
    id: PROVIDER_FAILED_FINDING,
    severity: 'error',
    message: `the doctor checks of module ${moduleId} failed (${isComputeError(error) ? error.code : name})`,
    details: { moduleId, error: name, ...(isComputeError(error) ? { code: error.code } : {}) },
  };
}

/**
 * Runs every module's findings provider, one after the other in registration order. A provider that throws, or
 * answers something that is not a list, becomes one `error` finding `doctor-provider-failed` naming the module (and
 * the error's name and code, never its message); the others still run.
 *
 * @example
 * ```ts
 * const { modules } = await runFindings(compute.registry.modules, compute.context);
 * ```
 */
export async function runFindings(modules: readonly ComputeModule[], ctx: ModuleContext): Promise<DoctorReport> {
  const report: ModuleFindings[] = [];
  for (const module of modules) {
    if (typeof module.findings !== 'function') continue;
    let findings: Finding[];
    try {
      const answered: unknown = await module.findings(ctx);
      if (!Array.isArray(answered)) throw new TypeError('a findings provider must answer a list');
      findings = [...answered];
    } catch (error) {
      ctx.log.error('doctor findings provider failed', {
        module: module.id,
        error: error instanceof Error ? error.name : typeof error,
      });
      findings = [failedFinding(module.id, error)];
    }
    report.push({ moduleId: module.id, findings });
  }
  return { modules: report };
}

/**
 * The `doctor` API group of the core module: `findings` (`compute:doctor:read`) runs every registered module's
 * findings provider ({@link runFindings}). Findings describe the whole control plane (any tenant's workflows and
 * machines), so only a root credential may read them: any other is PERMISSION_DENIED `root-only`. The method is
 * decided on the tenant the input names, like every other method: a credential passes its own.
 *
 * @example
 * ```ts
 * const { modules } = await compute.api.doctor.findings(rootToken, { tenantId: 'root' });
 * ```
 */
export function doctorApi(modules: () => readonly ComputeModule[]) {
  const findings = defineApiMethod({
    input: v.object({ tenantId: textSchema('tenantId') }),
    permission: 'compute:doctor:read',
    resource: (input, ctx) => resolveTenantResource(ctx.sql, input.tenantId),
    description:
      "Every module's doctor findings ({ modules: [{ moduleId, findings }] }); a provider that fails is an error " +
      'finding naming its module. Root credentials only.',
    handler: async (_input, ctx): Promise<DoctorReport> => {
      if (ctx.principal.tenantId !== ROOT_TENANT_ID) {
        throw new ComputeError('PERMISSION_DENIED', 'doctor findings span every tenant: only a root credential', {
          details: { reason: 'root-only', permission: 'compute:doctor:read' },
        });
      }
      const { principal: _principal, resource: _resource, ...moduleCtx } = ctx;
      return runFindings(modules(), moduleCtx);
    },
  });

  return defineApiGroup('doctor', { findings });
}

/** The `doctor` group {@link doctorApi} returns. */
export type DoctorApi = ReturnType<typeof doctorApi>;
