export * from './agents';
export * from './commands';
export * from './credentials';
export * from './events';
export * from './tenancy';
export * from './work';
