"""An argparse parser whose sub-commands own their bad flags.

argparse hands a flag no sub-command knows back up to the top parser, which then prints
its own usage (``usage: logserver [-h] COMMAND ...``), not the usage of the command the
user was typing. Here the innermost sub-command reports it, with its own usage line.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


class SubcommandUsageParser(argparse.ArgumentParser):
    """Sub-parsers made from it (add_subparsers uses the parent's class) report unknown
    arguments themselves when they have no sub-commands of their own."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self._subparsers is None:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras
