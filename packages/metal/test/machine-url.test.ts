import { describe, expect, it } from 'vitest';
import { checkMachineUrl } from '../src';

const machine = { own: ['10.0.0.7', 'fd12:3456::7'] };

function refusal(url: unknown) {
  try {
    checkMachineUrl(url, machine);
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('the address check of httpViaSite', () => {
  it("accepts http and https to one of the machine's own addresses, IPv4 or IPv6 in any spelling", () => {
    expect(checkMachineUrl('https://10.0.0.7:50000/machine/version', machine)).toMatchObject({
      address: '10.0.0.7',
      family: 'ipv4',
    });
    expect(checkMachineUrl('http://[fd12:3456:0:0::7]/health', machine)).toMatchObject({ family: 'ipv6' });
    expect(checkMachineUrl('http://[::ffff:10.0.0.7]/', machine)).toMatchObject({ address: '10.0.0.7' });
  });

  it.each([
    ['loopback', 'http://127.0.0.1/'],
    ['loopback elsewhere in 127/8', 'http://127.8.9.10:8080/'],
    ['IPv6 loopback', 'http://[::1]/'],
    ['IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]/'],
    ['the metadata service', 'http://169.254.169.254/latest/meta-data/'],
    ['link-local', 'http://169.254.10.1/'],
    ['IPv6 link-local', 'http://[fe80::1]/'],
    ['the unspecified address', 'http://0.0.0.0/'],
    ['broadcast', 'http://255.255.255.255/'],
    ['multicast', 'http://224.0.0.1/'],
    ["another machine's address", 'http://10.0.0.8/'],
    ['a host name', 'http://bmc.example/'],
    ['localhost by name', 'http://localhost/'],
    ['a decimal IPv4 spelling that URL parsing turns into loopback', 'http://2130706433/'],
    ['credentials in the URL', 'http://admin:secret@10.0.0.7/'],
    ['another scheme', 'file:///etc/passwd'],
    ['gopher', 'gopher://10.0.0.7/'],
    ['text that is no URL', 'not a url'],
    ['something that is not a string', 42],
  ])('refuses %s with INVALID_INPUT at the url', (_, url) => {
    expect(refusal(url)).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['url'], reason: 'ssrf' } });
  });

  it('refuses every forbidden address even when a machine record lists it as its own', () => {
    const confused = { own: ['127.0.0.1', '169.254.169.254', '::1'] };
    for (const url of ['http://127.0.0.1/', 'http://169.254.169.254/', 'http://[::1]/', 'http://[::ffff:127.0.0.1]/']) {
      expect(() => checkMachineUrl(url, confused)).toThrowError(expect.objectContaining({ code: 'INVALID_INPUT' }));
    }
  });

  it('never puts credentials of a refused URL into its message', () => {
    const error = refusal('http://admin:hunter2@10.0.0.7/') as Error;
    expect(error.message).not.toContain('hunter2');
  });
});
