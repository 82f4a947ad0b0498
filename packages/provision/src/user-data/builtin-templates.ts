import { ComputeError } from '@better-compute/core';
import type { UserDataTemplate, UserDataVariables } from './render-template';

/**
 * Where the built-in templates put bcd and what it reads: the binary, its config (JSON: `controlPlaneUrl`, `nodeId`,
 * `joinTokenFile`), the join token (mode 0600; bcd joins with it on its first start and removes it), the systemd unit
 * and (cloud-init only) the installer that downloads and checks the binary.
 *
 * @example
 * ```ts
 * BCD_PATHS.joinToken; // '/etc/bcd/join-token'
 * ```
 */
export const BCD_PATHS = Object.freeze({
  binary: '/usr/local/bin/bcd',
  config: '/etc/bcd/bcd.json',
  joinToken: '/etc/bcd/join-token',
  unit: '/etc/systemd/system/bcd.service',
  installer: '/usr/local/lib/bcd/install-bcd.sh',
});

/**
 * The systemd unit both built-ins install: it starts bcd with its config; nothing in it comes from a variable.
 *
 * @example
 * ```ts
 * BCD_SYSTEMD_UNIT.includes('ExecStart=/usr/local/bin/bcd --config /etc/bcd/bcd.json'); // true
 * ```
 */
export const BCD_SYSTEMD_UNIT = [
  '[Unit]',
  'Description=better-compute node daemon (bcd)',
  'Wants=network-online.target',
  'After=network-online.target',
  '',
  '[Service]',
  `ExecStart=${BCD_PATHS.binary} --config ${BCD_PATHS.config}`,
  'Restart=always',
  'RestartSec=5',
  '',
  '[Install]',
  'WantedBy=multi-user.target',
  '',
].join('\n');

/**
 * The installer the cloud-init template runs as `sh install-bcd.sh <bcdUrl> <bcdSha256>`: the URL and the digest
 * arrive as arguments, never inside the script. It downloads to a temporary file, installs bcd only if the SHA-256
 * matches, then enables and starts the unit.
 *
 * @example
 * ```ts
 * BCD_INSTALL_SCRIPT.startsWith('#!/bin/sh'); // true
 * ```
 */
export const BCD_INSTALL_SCRIPT = [
  '#!/bin/sh',
  '# Installs bcd from $1 if its SHA-256 is $2, then starts it. Written by better-compute user data.',
  'set -eu',
  'url="$1"',
  'want="$2"',
  `dir="$(dirname ${BCD_PATHS.binary})"`,
  'mkdir -p "$dir"',
  'tmp="$(mktemp "$dir/.bcd.XXXXXX")"',
  `trap 'rm -f "$tmp"' EXIT`,
  'if command -v curl >/dev/null 2>&1; then',
  '  curl -fsSL --retry 10 --retry-delay 5 --retry-connrefused -o "$tmp" "$url"',
  'else',
  '  wget -q -O "$tmp" "$url"',
  'fi',
  `got="$(sha256sum "$tmp" | cut -d ' ' -f 1)"`,
  'if [ "$got" != "$want" ]; then',
  '  echo "bcd: the download does not match its SHA-256; not installed" >&2',
  '  exit 1',
  'fi',
  'chmod 0755 "$tmp"',
  `mv "$tmp" ${BCD_PATHS.binary}`,
  'trap - EXIT',
  'systemctl daemon-reload',
  'systemctl enable --now bcd.service',
  '',
].join('\n');

/** The Ignition spec version the built-in writes (sha256 verification needs 3.1.0 or later). */
export const IGNITION_VERSION = '3.3.0';

const SHA256 = /^[0-9a-f]{64}$/;

function invalidValue(name: keyof UserDataVariables, message: string): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path: ['values', name] } });
}

function httpUrl(variables: UserDataVariables, name: 'controlPlaneUrl' | 'bcdUrl'): string {
  const value = variables[name];
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    throw invalidValue(name, `${name} must be an http(s) URL`);
  }
  return value;
}

function sha256(variables: UserDataVariables): string {
  const value = variables.bcdSha256.toLowerCase();
  if (!SHA256.test(value)) throw invalidValue('bcdSha256', 'bcdSha256 must be 64 hexadecimal digits');
  return value;
}

/** What both built-ins read, checked once; reading a variable with no value is INVALID_CONFIG (see renderTemplate). */
function builtinValues(variables: UserDataVariables) {
  return {
    nodeId: variables.nodeId,
    hostname: variables.hostname,
    joinToken: variables.joinToken,
    controlPlaneUrl: httpUrl(variables, 'controlPlaneUrl'),
    bcdUrl: httpUrl(variables, 'bcdUrl'),
    bcdSha256: sha256(variables),
  };
}

function bcdConfig(values: ReturnType<typeof builtinValues>): string {
  const config = { controlPlaneUrl: values.controlPlaneUrl, nodeId: values.nodeId, joinTokenFile: BCD_PATHS.joinToken };
  return `${JSON.stringify(config, null, 2)}\n`;
}

/**
 * The built-in `cloud-init` template: `#cloud-config` followed by the document as indented JSON (JSON is YAML, and
 * every value is a quoted scalar, so none can add a line or a key). It sets the hostname, writes the join token
 * (0600), bcd's config, its unit and the installer, and runs the installer with the URL and digest as arguments.
 *
 * @example
 * ```ts
 * const userData = renderTemplate(cloudInitTemplate, { nodeId, hostname, joinToken, controlPlaneUrl, bcdUrl, bcdSha256 });
 * ```
 */
export const cloudInitTemplate: UserDataTemplate = (variables) => {
  const values = builtinValues(variables);
  const document = {
    hostname: values.hostname,
    preserve_hostname: false,
    write_files: [
      { path: BCD_PATHS.joinToken, owner: 'root:root', permissions: '0600', content: values.joinToken },
      { path: BCD_PATHS.config, owner: 'root:root', permissions: '0644', content: bcdConfig(values) },
      { path: BCD_PATHS.unit, owner: 'root:root', permissions: '0644', content: BCD_SYSTEMD_UNIT },
      { path: BCD_PATHS.installer, owner: 'root:root', permissions: '0755', content: BCD_INSTALL_SCRIPT },
    ],
    // A list runs without a shell: cloud-init quotes each argument.
    runcmd: [['/bin/sh', BCD_PATHS.installer, values.bcdUrl, values.bcdSha256]],
  };
  return `#cloud-config\n${JSON.stringify(document, null, 2)}\n`;
};

function dataUrl(text: string): string {
  return `data:;base64,${Buffer.from(text, 'utf8').toString('base64')}`;
}

/**
 * The built-in `ignition` template: an Ignition v3 (3.3.0) config as JSON. Ignition itself fetches bcd from `bcdUrl`
 * and refuses it unless its `sha256-…` verification matches; the hostname, join token (0600) and bcd's config are data
 * URLs, and the `bcd.service` unit is enabled.
 *
 * @example
 * ```ts
 * const config = JSON.parse(renderTemplate(ignitionTemplate, variables));
 * config.ignition.version; // '3.3.0'
 * ```
 */
export const ignitionTemplate: UserDataTemplate = (variables) => {
  const values = builtinValues(variables);
  const config = {
    ignition: { version: IGNITION_VERSION },
    storage: {
      files: [
        { path: '/etc/hostname', mode: 0o644, overwrite: true, contents: { source: dataUrl(`${values.hostname}\n`) } },
        {
          path: BCD_PATHS.binary,
          mode: 0o755,
          overwrite: true,
          contents: { source: values.bcdUrl, verification: { hash: `sha256-${values.bcdSha256}` } },
        },
        { path: BCD_PATHS.joinToken, mode: 0o600, overwrite: true, contents: { source: dataUrl(values.joinToken) } },
        { path: BCD_PATHS.config, mode: 0o644, overwrite: true, contents: { source: dataUrl(bcdConfig(values)) } },
      ],
    },
    systemd: { units: [{ name: 'bcd.service', enabled: true, contents: BCD_SYSTEMD_UNIT }] },
  };
  return JSON.stringify(config);
};

/**
 * The templates provision ships, by name: `cloud-init` and `ignition`. `talos` ships none; a talos profile names a
 * registered template.
 *
 * @example
 * ```ts
 * BUILTIN_USER_DATA_TEMPLATES['cloud-init'] === cloudInitTemplate; // true
 * ```
 */
export const BUILTIN_USER_DATA_TEMPLATES: Readonly<Record<string, UserDataTemplate>> = Object.freeze({
  'cloud-init': cloudInitTemplate,
  ignition: ignitionTemplate,
});
