export type { ReconcileResult, WorkQueue, WorkRequest } from './types';
