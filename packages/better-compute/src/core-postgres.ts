export * from '@better-compute/core/postgres';
