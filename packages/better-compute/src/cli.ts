#!/usr/bin/env node
// The `better-compute` command, the same as @better-compute/cli's bin: `npx better-compute --help`.
import { runBin } from '@better-compute/cli';

runBin();
