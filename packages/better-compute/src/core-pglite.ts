export * from '@better-compute/core/pglite';
