export * from './commands';
export * from './events';
export * from './tenancy';
export * from './work';
