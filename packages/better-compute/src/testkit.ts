export * from '@better-compute/testkit';
