export * from '@better-compute/core';
