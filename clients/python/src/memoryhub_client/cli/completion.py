"""``memoryhub completion bash|zsh``: scripts that complete commands and their options."""

from __future__ import annotations

import argparse


def words(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Each command's options (and the top level's commands under ``""``)."""
    table: dict[str, list[str]] = {"": []}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                table[""].append(name)
                table[name] = [option for a in sub._actions for option in a.option_strings] + _choices(sub)
        else:
            table[""].extend(action.option_strings)
    return table


def _choices(parser: argparse.ArgumentParser) -> list[str]:
    return [str(choice) for a in parser._actions if a.choices and not a.option_strings for choice in a.choices]


def bash(parser: argparse.ArgumentParser) -> str:
    table = words(parser)
    cases = "\n".join(f'        {name}) opts="{" ".join(options)}" ;;' for name, options in table.items() if name)
    return f"""# memoryhub bash completion: eval "$(memoryhub completion bash)"
_memoryhub() {{
    local cur command opts i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    command=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in -*) ;; *) command="${{COMP_WORDS[i]}}"; break ;; esac
    done
    case "$command" in
        "") opts="{" ".join(table[""])}" ;;
{cases}
        *) opts="" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
complete -o default -F _memoryhub memoryhub
"""


def zsh(parser: argparse.ArgumentParser) -> str:
    return '#compdef memoryhub\n# memoryhub zsh completion: eval "$(memoryhub completion zsh)"\n' + (
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser).split("\n", 1)[1]
    )
