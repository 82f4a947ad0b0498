export * from '@better-compute/core/conformance';
