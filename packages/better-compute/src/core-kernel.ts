export * from '@better-compute/core/kernel';
