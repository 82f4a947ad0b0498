// Preloaded into the benchmarked server (node --expose-gc --import …/server-gc.mjs): a SIGUSR2 runs a full GC, so the
// bench reads the server's heap and RSS without the garbage of whatever it last did. Nothing else of the server changes.
if (typeof globalThis.gc === 'function') {
  process.on('SIGUSR2', () => globalThis.gc());
}
