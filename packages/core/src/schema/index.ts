export * from './queues';
export * from './tenancy';
