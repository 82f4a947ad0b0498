export * from '@better-compute/core/checks';
