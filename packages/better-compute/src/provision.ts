export * from '@better-compute/provision';
