import { createPrivateKey, X509Certificate } from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SqlExecutor } from '@better-compute/core';
import { systemClock } from '@better-compute/core/kernel';
import { issueServerCertificate, readCaCertificate } from '@better-compute/pki';
import type { ServerConfig } from './config';

/** The TLS material both ports serve with. */
export interface TlsMaterial {
  cert: string;
  key: string;
  /** What clients should trust for the server certificate (TLS_CA, or the control plane's CA). */
  serverCa: string | undefined;
  /** The control plane's CA: the agent port asks for client certificates issued by it. */
  agentCa: string;
  /** Where the CA certificate operators pass to `curl --cacert` is written, when the server issued its own. */
  caFile: string | undefined;
  /** Where the material came from. */
  source: 'files' | 'issued' | 'reused';
}

const RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;

async function writeAtomically(path: string, text: string, mode: number): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode });
  await chmod(temporary, mode);
  await rename(temporary, path);
}

async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Whether a stored pair can be served again: issued by this CA, matching keys, every host named, not expiring soon. */
function reusable(certPem: string, keyPem: string, caPem: string, config: ServerConfig['tls']): boolean {
  try {
    const cert = new X509Certificate(certPem);
    const ca = new X509Certificate(caPem);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
    // Two processes issuing at once may leave one's key beside the other's certificate.
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return false;
    if (new Date(cert.validTo).getTime() - Date.now() < RENEW_BEFORE_MS) return false;
    const names = cert.subjectAltName ?? '';
    return (
      config.hostnames.every((name) => names.includes(`DNS:${name}`)) &&
      config.ips.every((ip) => names.includes(`IP Address:${ip}`) || names.includes(`IP Address:${ip.toUpperCase()}`))
    );
  } catch {
    return false;
  }
}

/**
 * The TLS material: from TLS_CERT / TLS_KEY (and TLS_CA) when given, else a server certificate issued by the control
 * plane's own CA, kept under `<dataDir>/tls/` (server.crt, server.key at 0600, ca.crt) and reissued when it is missing,
 * names other hosts, was issued by another CA or expires within 30 days. The agent port always trusts the control
 * plane's CA for client certificates.
 *
 * @example
 * ```ts
 * const tls = await loadTlsMaterial(compute.database, config, key);
 * ```
 */
export async function loadTlsMaterial(sql: SqlExecutor, config: ServerConfig, key: Uint8Array): Promise<TlsMaterial> {
  const deps = { key, clock: systemClock };
  const dir = join(config.dataDir, 'tls');
  if (config.tls.certFile !== undefined && config.tls.keyFile !== undefined) {
    // The CA must exist for the agent port; issuing nothing, the first start creates it here.
    let agentCa = await readCaCertificate(sql);
    if (agentCa === undefined) {
      agentCa = (await issueServerCertificate(sql, { hostnames: ['localhost'] }, deps)).caCertificatePem;
    }
    return {
      cert: await readFile(config.tls.certFile, 'utf8'),
      key: await readFile(config.tls.keyFile, 'utf8'),
      serverCa: config.tls.caFile === undefined ? undefined : await readFile(config.tls.caFile, 'utf8'),
      agentCa,
      caFile: config.tls.caFile,
      source: 'files',
    };
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const certFile = join(dir, 'server.crt');
  const keyFile = join(dir, 'server.key');
  const caFile = join(dir, 'ca.crt');
  const caPem = await readCaCertificate(sql);
  const [storedCert, storedKey] = await Promise.all([readIfPresent(certFile), readIfPresent(keyFile)]);
  if (
    caPem !== undefined &&
    storedCert !== undefined &&
    storedKey !== undefined &&
    reusable(storedCert, storedKey, caPem, config.tls)
  ) {
    if ((await readIfPresent(caFile)) !== caPem) await writeAtomically(caFile, caPem, 0o644);
    return { cert: storedCert, key: storedKey, serverCa: caPem, agentCa: caPem, caFile, source: 'reused' };
  }
  const issued = await issueServerCertificate(sql, { hostnames: config.tls.hostnames, ips: config.tls.ips }, deps);
  await writeAtomically(keyFile, issued.privateKeyPem, 0o600);
  await writeAtomically(certFile, issued.certificatePem, 0o644);
  await writeAtomically(caFile, issued.caCertificatePem, 0o644);
  return {
    cert: issued.certificatePem,
    key: issued.privateKeyPem,
    serverCa: issued.caCertificatePem,
    agentCa: issued.caCertificatePem,
    caFile,
    source: 'issued',
  };
}
