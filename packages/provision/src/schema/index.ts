export * from './profiles';
export * from './workflows';
