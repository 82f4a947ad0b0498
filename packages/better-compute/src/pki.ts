export * from '@better-compute/pki';
