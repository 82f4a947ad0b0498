import type { Command } from 'commander';
import { buildProgram } from '../program';
import type { Handler } from '../runtime';

interface Node {
  path: string[];
  description: string;
  options: { flags: string[]; description: string; takesValue: boolean; choices: readonly string[] | undefined }[];
  children: Node[];
}

function tree(command: Command, path: string[]): Node {
  return {
    path,
    description: command.description(),
    options: command.options
      .filter((o) => !o.hidden)
      .map((o) => ({
        flags: [o.long, o.short].filter((f): f is string => Boolean(f)),
        description: o.description,
        takesValue: o.required || o.optional,
        choices: o.argChoices,
      })),
    children: command.commands.map((child) => tree(child, [...path, child.name()])),
  };
}

function walk(node: Node, visit: (node: Node) => void): void {
  visit(node);
  for (const child of node.children) walk(child, visit);
}

const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** A bash completion function (zsh loads it through bashcompinit): subcommands, then each command's flags. */
export function bashScript(root: Node, globalFlags: string[]): string {
  const cases: string[] = [];
  walk(root, (node) => {
    const words = [
      ...node.children.map((c) => c.path[c.path.length - 1] as string),
      ...node.options.flatMap((o) => o.flags),
      ...globalFlags,
      '--help',
    ];
    const key = node.path.join(' ');
    cases.push(`    ${quote(key)}) words=${quote([...new Set(words)].join(' '))} ;;`);
  });
  // No variable named `path`: zsh, which runs this script through bashcompinit, ties `path` to PATH.
  return `# better-compute bash completion: source it, or put it in /etc/bash_completion.d/
_better_compute() {
  local cur sofar word i words
  cur="\${COMP_WORDS[COMP_CWORD]}"
  sofar=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case "$word" in -*) continue ;; esac
    case " $(_better_compute_children "$sofar") " in
      *" $word "*) sofar="\${sofar:+$sofar }$word" ;;
    esac
  done
  case "$sofar" in
${cases.join('\n')}
    *) words="" ;;
  esac
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$(printf '%s\\n' $words | grep -- '^-')" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "$(printf '%s\\n' $words | grep -v -- '^-')" -- "$cur")) ;;
  esac
  [ \${#COMPREPLY[@]} -eq 0 ] && [[ "$cur" != -* ]] && COMPREPLY=($(compgen -f -- "$cur"))
  return 0
}
_better_compute_children() {
  case "$1" in
${(() => {
  const lines: string[] = [];
  walk(root, (node) => {
    lines.push(
      `    ${quote(node.path.join(' '))}) echo ${quote(node.children.map((c) => c.path[c.path.length - 1]).join(' '))} ;;`,
    );
  });
  return lines.join('\n');
})()}
  esac
}
complete -o default -F _better_compute better-compute
`;
}

export function zshScript(root: Node, globalFlags: string[]): string {
  return `#compdef better-compute
# better-compute zsh completion: put it in a folder of $fpath as _better-compute, or source it.
autoload -U +X bashcompinit && bashcompinit
${bashScript(root, globalFlags)}`;
}

export function fishScript(root: Node): string {
  const lines = ['# better-compute fish completion: save as ~/.config/fish/completions/better-compute.fish'];
  lines.push('complete -c better-compute -f');
  walk(root, (node) => {
    const condition =
      node.path.length === 0
        ? '__fish_use_subcommand'
        : `__fish_seen_subcommand_from ${node.path[node.path.length - 1]}${
            node.path.length === 1
              ? `; and not __fish_seen_subcommand_from ${node.children.map((c) => c.path[c.path.length - 1]).join(' ')}`
              : ''
          }`;
    for (const child of node.children) {
      const name = child.path[child.path.length - 1] as string;
      lines.push(`complete -c better-compute -n ${quote(condition.trim())} -a ${name} -d ${quote(child.description)}`);
    }
    const optionCondition =
      node.path.length === 0 ? '' : ` -n ${quote(`__fish_seen_subcommand_from ${node.path[node.path.length - 1]}`)}`;
    for (const option of node.options) {
      const long = option.flags.find((f) => f.startsWith('--'))?.slice(2);
      const short = option.flags.find((f) => /^-[^-]$/.test(f))?.slice(1);
      let line = `complete -c better-compute${optionCondition}`;
      if (long) line += ` -l ${long}`;
      if (short) line += ` -s ${short}`;
      if (option.takesValue) line += option.choices ? ` -x -a ${quote(option.choices.join(' '))}` : ' -r -F';
      line += ` -d ${quote(option.description)}`;
      lines.push(line);
    }
  });
  return `${lines.join('\n')}\n`;
}

export const completion: Handler = async (_rt, args) => {
  const program = buildProgram();
  const root = tree(program, []);
  const globalFlags = root.options.flatMap((o) => o.flags);
  const shell = args[0] as string;
  const script =
    shell === 'bash'
      ? bashScript(root, globalFlags)
      : shell === 'zsh'
        ? zshScript(root, globalFlags)
        : fishScript(root);
  process.stdout.write(script);
  return 0;
};
