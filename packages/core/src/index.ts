export * from './clock';
export * from './errors';
export * from './ids';
export * from './migrations';
export { coreMigrationsFolder } from './migrations-folder';
export * from './sql';
