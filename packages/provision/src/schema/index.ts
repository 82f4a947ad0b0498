export * from './images';
export * from './profiles';
export * from './user-data';
export * from './workflows';
