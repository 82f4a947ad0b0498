#!/usr/bin/env node
import { runBin } from './main';

runBin();
