import { Argument, Command, InvalidArgumentError, Option } from 'commander';
import type { GlobalOptions } from './config';
import { createRuntime, type Handler } from './runtime';

/** The CLI's version (replaced at build time from package.json). */
declare const __CLI_VERSION__: string | undefined;
export const CLI_VERSION = typeof __CLI_VERSION__ === 'string' ? __CLI_VERSION__ : '0.0.0-dev';

type Loader = () => Promise<Record<string, Handler>>;

const load = {
  connection: () => import('./commands/connection') as unknown as Promise<Record<string, Handler>>,
  metal: () => import('./commands/metal') as unknown as Promise<Record<string, Handler>>,
  workflows: () => import('./commands/workflows') as unknown as Promise<Record<string, Handler>>,
  profiles: () => import('./commands/profiles') as unknown as Promise<Record<string, Handler>>,
  catalog: () => import('./commands/catalog') as unknown as Promise<Record<string, Handler>>,
  events: () => import('./commands/events') as unknown as Promise<Record<string, Handler>>,
  completion: () => import('./commands/completion') as unknown as Promise<Record<string, Handler>>,
} satisfies Record<string, Loader>;

/** Runs `handler` from the lazily imported module: only the command that runs pays for its imports. */
function run(loader: Loader, name: string) {
  return async (...params: unknown[]) => {
    const command = params[params.length - 1] as Command;
    const args = params.slice(0, -2);
    const globals = command.optsWithGlobals() as GlobalOptions;
    const rt = createRuntime(globals);
    const module = await loader();
    const handler = module[name] as Handler;
    const code = await handler(rt, args, command.opts());
    if (typeof code === 'number' && code !== 0) process.exitCode = code;
  };
}

function integer(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return Number(value);
  };
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

function examples(command: Command, ...lines: string[]): Command {
  return command.addHelpText('after', `\nExamples:\n${lines.map((line) => `  $ ${line}`).join('\n')}\n`);
}

const waitOption = () =>
  new Option('--wait', 'follow the workflow it starts as a live timeline; the exit code is the workflow’s outcome');
const nodeOption = () => new Option('--node <nodeId>', 'the workflow’s node (looked up from its events when left out)');
const pageOptions = (command: Command) =>
  command
    .option('--limit <n>', 'items per page', integer(1, 1000))
    .option('--cursor <cursor>', 'the page after this cursor (printed by the previous page)')
    .option('--all', 'every page');

/**
 * The `better-compute` command tree (commander). Handlers live in `commands/*` and are imported only when their
 * command runs, so `--help` loads commander and this file alone.
 *
 * @example
 * ```ts
 * await buildProgram().parseAsync(process.argv);
 * ```
 */
export function buildProgram(): Command {
  const program = new Command('better-compute')
    .description('The better-compute command line: a client of the control plane’s operator API.')
    .option('--url <url>', 'the server, e.g. https://cp.example.com:8443 (env BETTER_COMPUTE_URL)')
    .option('--token <token>', 'the bearer token (env BETTER_COMPUTE_TOKEN)')
    .option('--ca <file>', 'PEM of the CA the server’s certificate chains to (env BETTER_COMPUTE_CA)')
    .option('--context <name>', 'the named context to use (env BETTER_COMPUTE_CONTEXT; else the current one)')
    .option('--tenant <id>', 'the tenant to act on (env BETTER_COMPUTE_TENANT; else the context’s, else root)')
    .option('--json', 'print the answer as JSON (the shapes are in the README)')
    .option('-q, --quiet', 'print ids only, one per line')
    .option('--no-color', 'no colour (also NO_COLOR; colour is only ever used on a terminal)')
    // Errors are reported by main() as `error: USAGE …`; commander prints nothing itself.
    .configureOutput({ outputError: () => undefined })
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false })
    .exitOverride();
  examples(
    program,
    'better-compute login --url https://cp.example.com:8443 --ca ./data/tls/ca.crt --token "$TOKEN"',
    "better-compute metal list --selector 'gpu=h100'",
    'better-compute workflows watch wf_01k… ',
  );
  program.addHelpText(
    'after',
    '\nbetter-compute --version (or -V) prints the version.\nExit codes: 0 ok, 1 internal, 2 usage or invalid input, 3 not found, 4 conflict or invalid state, 5 refused,\n6 unreachable, 7 incompatible server, 8 workflow failed, 9 workflow cancelled, 10 doctor findings, 130 interrupted.\n',
  );

  // Connection and contexts.
  examples(
    program
      .command('login')
      .description('check a server and a token, and save them as a context (the token file mode 0600, never printed)')
      .option('--name <context>', 'the context to write (default: --context, else "default")')
      .action(run(load.connection, 'login')),
    'better-compute login --url https://cp.example.com:8443 --ca ./data/tls/ca.crt --token "$TOKEN"',
    'echo "$TOKEN" | better-compute login --url https://localhost:8443 --ca ca.crt --name lab --tenant acme',
  );
  const context = program.command('context').description('named contexts in the config file');
  examples(
    context
      .command('list')
      .description('every context; * marks the current one')
      .action(run(load.connection, 'contextList')),
    'better-compute context list',
  );
  examples(
    context
      .command('use')
      .argument('<name>')
      .description('make a context the current one')
      .action(run(load.connection, 'contextUse')),
    'better-compute context use lab',
  );
  examples(
    context
      .command('show')
      .argument('[name]')
      .description('a context (the token is never printed, only whether one is stored)')
      .action(run(load.connection, 'contextShow')),
    'better-compute context show',
  );
  examples(
    context
      .command('delete')
      .argument('<name>')
      .description('remove a context')
      .action(run(load.connection, 'contextDelete')),
    'better-compute context delete lab',
  );

  // metal
  const metal = program.command('metal').description('bare-metal machines (the metal API group)');
  examples(
    pageOptions(
      metal
        .command('list')
        .description('machines of the tenant (metal.list)')
        .option('--state <state>', 'only machines in this state')
        .option('--site <siteId>', 'only machines of this site')
        .option('--pool <pool>', 'only machines of this pool')
        .option(
          '--selector <expr>',
          'a when expression on the machine’s labels: key, !key, key=value, key!=value, joined by &&',
        ),
    ).action(run(load.metal, 'list')),
    "better-compute metal list --state ready --selector 'gpu=h100 && rack=r1 && !maintenance'",
    'better-compute metal list -q',
  );
  examples(
    metal.command('get').argument('<nodeId>').description('one machine (metal.get)').action(run(load.metal, 'get')),
    'better-compute metal get node_01k…',
  );
  for (const verb of ['enroll', 'adopt'] as const) {
    const command = metal
      .command(verb)
      .description(
        verb === 'enroll'
          ? 'enroll a machine by its BMC and MACs, starting metal.enroll (metal.enroll)'
          : 'take over a running machine without touching its disks (metal.adopt)',
      )
      .option('-f, --file <file>', 'the whole input as YAML or JSON (flags override its fields)')
      .option('--site <siteId>', 'the site whose agent reaches the BMC')
      .option('--name <name>', 'the machine’s name')
      .option('--bmc <address>', 'the BMC address, host or host:port')
      .option('--driver <driver>', 'the BMC driver (ipmi, redfish, …)')
      .option('--bmc-username <username>', 'the BMC user')
      .option('--bmc-password-env <VAR>', 'read the BMC password from this environment variable (never a flag value)')
      .option('--mac <mac>', 'a MAC of the machine (repeat)', collect)
      .option('--label <key=value>', 'a label (repeat)', collect)
      .option('--pool <pool>', 'the pool it belongs to');
    if (verb === 'enroll') {
      command.addOption(
        new Option('--hold-after <phase>', 'hold the machine after this phase').choices(['enrolling', 'inspecting']),
      );
    }
    command.addOption(waitOption()).action(run(load.metal, verb));
    examples(
      command,
      `BMC_PASSWORD=… better-compute metal ${verb} --site site_01k… --name gpu-01 --bmc 10.0.0.7 --driver redfish --bmc-username admin --bmc-password-env BMC_PASSWORD --mac 0c:42:a1:00:00:01 --label gpu=h100`,
      `better-compute metal ${verb} -f machine.yaml --wait`,
    );
  }
  const lifecycle: [string, string][] = [
    ['inspect', 'read the machine’s hardware again (metal.inspect)'],
    ['commission', 'inspect, diagnose and burn in the machine (metal.commission)'],
    ['release', 'wipe and return a deployed machine to the pool (metal.release)'],
    ['retire', 'take the machine out of service for good (metal.retire)'],
    ['recover', 'bring a failed machine back to its last good state (metal.recover)'],
  ];
  for (const [verb, description] of lifecycle) {
    examples(
      metal
        .command(verb)
        .argument('<nodeId>')
        .description(description)
        .addOption(waitOption())
        .action(run(load.metal, verb)),
      `better-compute metal ${verb} node_01k…${verb === 'release' ? ' --wait' : ''}`,
    );
  }
  examples(
    metal
      .command('deploy')
      .argument('<nodeId>')
      .description('deploy a profile onto a machine (metal.deploy)')
      .requiredOption('--profile <profileId>', 'the profile to run, e.g. metal.deploy-image')
      .option('--profile-version <n>', 'a version of the profile (else the latest)', integer(1))
      .option('--image <name@version>', 'the catalog image')
      .option('--user-data <file>', 'cloud-init user data, read from this file')
      .addOption(waitOption())
      .action(run(load.metal, 'deploy')),
    'better-compute metal deploy node_01k… --profile metal.deploy-image --image ubuntu@24.04 --wait',
  );
  examples(
    metal
      .command('abort')
      .argument('<nodeId>')
      .description('abort the machine’s workflow in flight (metal.abort)')
      .option('--reason <text>', 'why, kept with the workflow')
      .action(run(load.metal, 'abort')),
    'better-compute metal abort node_01k… --reason "wrong image"',
  );
  examples(
    metal
      .command('labels')
      .argument('<nodeId>')
      .argument('[changes...]', 'key=value to set, key- to remove')
      .description('show or change a machine’s labels (metal.setLabels with the merged set)')
      .option('--replace', 'replace every label with the given ones')
      .action(run(load.metal, 'labels')),
    'better-compute metal labels node_01k… rack=r7 gpu-',
  );

  // workflows
  const workflows = program.command('workflows').description('workflows of a node (the workflows API group)');
  examples(
    pageOptions(
      workflows
        .command('list')
        .description('a node’s workflows, newest first (workflows.list)')
        .requiredOption('--node <nodeId>', 'the node'),
    ).action(run(load.workflows, 'list')),
    'better-compute workflows list --node node_01k…',
  );
  examples(
    workflows
      .command('get')
      .argument('<workflowId>')
      .description('a workflow and its steps (workflows.get)')
      .addOption(nodeOption())
      .action(run(load.workflows, 'get')),
    'better-compute workflows get wf_01k… --node node_01k…',
  );
  examples(
    workflows
      .command('watch')
      .argument('<workflowId>')
      .description('follow a workflow as a live timeline until it ends; the exit code is its outcome')
      .addOption(nodeOption())
      .action(run(load.workflows, 'watch')),
    'better-compute workflows watch wf_01k…',
  );
  examples(
    workflows
      .command('abort')
      .argument('<workflowId>')
      .description('abort a workflow (workflows.abort)')
      .addOption(nodeOption())
      .option('--reason <text>', 'why')
      .action(run(load.workflows, 'abort')),
    'better-compute workflows abort wf_01k… --reason "maintenance"',
  );
  examples(
    workflows
      .command('retry')
      .argument('<workflowId>')
      .description('run a failed workflow again (workflows.retry)')
      .addOption(nodeOption())
      .option('--from-step <stepId>', 'start again from this step')
      .addOption(waitOption())
      .action(run(load.workflows, 'retry')),
    'better-compute workflows retry wf_01k… --from-step main.3 --wait',
  );
  for (const verb of ['pause', 'resume'] as const) {
    examples(
      workflows
        .command(verb)
        .argument('<workflowId>')
        .description(`${verb} a workflow (workflows.${verb})`)
        .addOption(nodeOption())
        .action(run(load.workflows, verb)),
      `better-compute workflows ${verb} wf_01k…`,
    );
  }

  // profiles
  const profiles = program.command('profiles').description('profiles (the profiles API group)');
  examples(
    pageOptions(profiles.command('list').description('every profile the tenant can use (profiles.list)')).action(
      run(load.profiles, 'list'),
    ),
    'better-compute profiles list',
  );
  examples(
    profiles
      .command('get')
      .argument('<profileId>')
      .description('a profile’s document (profiles.get)')
      .option('--version <n>', 'a version (else the latest)', integer(1))
      .action(run(load.profiles, 'get')),
    'better-compute profiles get metal.deploy-image',
  );
  examples(
    profiles
      .command('create')
      .description('store a profile version from a YAML or JSON file (profiles.create)')
      .requiredOption('-f, --file <file>', 'the profile document (YAML or JSON; - for stdin)')
      .option('--public', 'visible to every tenant (root only)')
      .action(run(load.profiles, 'create')),
    'better-compute profiles create -f talos.yaml',
  );
  examples(
    profiles
      .command('validate')
      .argument('[profileId]', 'a stored or shipped profile, instead of -f')
      .description('check a profile against the server’s steps (profiles.validate); exit 2 when it does not resolve')
      .option('-f, --file <file>', 'the profile document (YAML or JSON; - for stdin)')
      .option('--version <n>', 'a version of a stored profile', integer(1))
      .action(run(load.profiles, 'validate')),
    'better-compute profiles validate -f talos.yaml',
  );
  examples(
    profiles
      .command('render')
      .argument('[profileId]', 'a stored or shipped profile, instead of -f')
      .description('the plan a deploy would run: each step, where it runs, its driver, its when (profiles.render)')
      .option('-f, --file <file>', 'the profile document (YAML or JSON; - for stdin)')
      .option('--version <n>', 'a version of a stored profile', integer(1))
      .option('--node <nodeId>', 'evaluate each step’s when on this node’s labels')
      .action(run(load.profiles, 'render')),
    'better-compute profiles render metal.deploy-image --node node_01k…',
  );

  // images, sites, credentials
  const images = program.command('images').description('the image catalog (the images API group)');
  examples(
    pageOptions(
      images
        .command('list')
        .description('images the tenant can use (images.list)')
        .option('--name <name>', 'one image name'),
    ).action(run(load.catalog, 'imagesList')),
    'better-compute images list --name ubuntu',
  );
  examples(
    images
      .command('register')
      .description('register a signed image by digest (images.register)')
      .requiredOption('--name <name>', 'the image name')
      .requiredOption('--version <version>', 'its version (name@version is immutable)')
      .requiredOption('--digest <digest>', 'sha256:… of the image')
      .option('--signature <base64url>', 'the signature over the digest')
      .option('--signature-file <file>', 'read the signature from a file')
      .option('--signer <signerId>', 'the allowlisted signer that signed it')
      .option('--image-url <url>', 'where agents download it')
      .option('--public', 'visible to every tenant (root only)')
      .action(run(load.catalog, 'imagesRegister')),
    'better-compute images register --name ubuntu --version 24.04 --digest sha256:… --signature-file ubuntu.sig --image-url https://…/ubuntu.img',
  );
  const sites = program.command('sites').description('sites (the sites API group)');
  examples(
    pageOptions(sites.command('list').description('sites and their agents (sites.list)')).action(
      run(load.catalog, 'sitesList'),
    ),
    'better-compute sites list',
  );
  examples(
    sites
      .command('create')
      .argument('<name>')
      .description('create a site (sites.create)')
      .action(run(load.catalog, 'sitesCreate')),
    'better-compute sites create dc-1',
  );
  examples(
    sites
      .command('join-token')
      .argument('<siteId>')
      .description('a join token for the site’s agent, shown once (sites.joinToken)')
      .option('--ttl <seconds>', 'how long it is valid (60 to 604800)', integer(60, 604_800))
      .option('--max-uses <n>', 'how many agents may join with it', integer(1, 100))
      .action(run(load.catalog, 'sitesJoinToken')),
    'better-compute sites join-token site_01k… --ttl 3600',
  );
  const credentials = program.command('credentials').description('API credentials (the credentials API group)');
  examples(
    pageOptions(credentials.command('list').description('credentials of the tenant (credentials.list)')).action(
      run(load.catalog, 'credentialsList'),
    ),
    'better-compute credentials list',
  );
  examples(
    credentials
      .command('create')
      .description('create a credential; its token is printed this once (credentials.create)')
      .requiredOption('--name <name>', 'what it is for')
      .requiredOption('--permission <grant>', 'a grant, e.g. compute:metal:* (repeat)', collect)
      .option('--expires-at <iso8601>', 'when it stops working')
      .action(run(load.catalog, 'credentialsCreate')),
    'better-compute credentials create --name ci --permission compute:metal:read --permission compute:workflows:read',
  );
  examples(
    credentials
      .command('revoke')
      .argument('<credentialId>')
      .description('revoke a credential (credentials.revoke)')
      .action(run(load.catalog, 'credentialsRevoke')),
    'better-compute credentials revoke cred_01k…',
  );

  // events, doctor, completion
  const events = program.command('events').description('the event stream');
  examples(
    events
      .command('tail')
      .description('the latest events (events.list), then with --follow every new one as it happens (SSE)')
      .option('-f, --follow', 'keep streaming new events')
      .option('--type <type>', 'only this event type (repeat)', collect)
      .option('--subject <prefix>', 'only subjects starting with this, e.g. node/node_01k…')
      .option(
        '-n, --lines <n>',
        'how many past events to print first (default 20, at most 1000; 0 for none)',
        integer(0, 1_000),
      )
      .option('--all-tenants', 'every tenant’s events (root only)')
      .action(run(load.events, 'tail')),
    'better-compute events tail --follow --subject node/ --type metal.node.deployed',
  );
  examples(
    program
      .command('doctor')
      .description('every module’s findings, grouped by severity (doctor.findings)')
      .addOption(
        new Option('--fail-on <severity>', 'exit 10 when a finding is at least this severe').choices([
          'error',
          'warning',
          'info',
        ]),
      )
      .action(run(load.catalog, 'doctor')),
    'better-compute doctor --fail-on warning',
  );
  examples(
    program
      .command('completion')
      .description('print the shell completion script')
      .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(['bash', 'zsh', 'fish']))
      .action(run(load.completion, 'completion')),
    'better-compute completion bash > /etc/bash_completion.d/better-compute',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell variable, printed as it is
    'better-compute completion zsh > "${fpath[1]}/_better-compute"',
    'better-compute completion fish > ~/.config/fish/completions/better-compute.fish',
  );
  return program;
}
