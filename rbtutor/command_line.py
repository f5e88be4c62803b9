"""What every part of the ``rbtutor`` command shares: an argument parser that refuses in one line."""

from __future__ import annotations

import argparse


class BriefParser(argparse.ArgumentParser):
    """An argument parser whose refusal is one line and exit status 2 (argparse prints the whole usage)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (`{self.prog} --help` shows the options)\n")
