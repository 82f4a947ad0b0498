export * from '@better-compute/metal';
