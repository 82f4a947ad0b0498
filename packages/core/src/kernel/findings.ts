import type { ModuleContext } from './module';

/** How bad a doctor finding is. */
export type FindingSeverity = 'info' | 'warning' | 'error';

/** One thing `better-compute doctor` reports. */
export interface Finding {
  id: string;
  severity: FindingSeverity;
  message: string;
  details?: Record<string, unknown>;
}

/** A module's doctor checks. */
export type FindingsProvider = (ctx: ModuleContext) => Promise<readonly Finding[]>;
