export * from '@better-compute/core/nodes';
