"""Step: execute. Run a submitted notebook in the confined kernel, bounded in time and output, in four modules.

* :mod:`.preprocessor`: :class:`BoundedExecute`, nbgrader's ``Execute`` with a time limit for the whole
  notebook, survival of a dying kernel and bounded outputs;
* :mod:`.kernel`: the kernel client and manager that answer as soon as the kernel does, and the kernel seeds;
* :mod:`.messages`: each kernel message checked where it arrives;
* :mod:`.folders`: the throwaway folders a kernel works in.

This package re-exports their public names, so ``from rbtutor.grading.execute import BoundedExecute`` keeps working.
"""

from .folders import remove_tree, throwaway_folder
from .kernel import RECONNECT_SECONDS, SEED_KEY_FILE, PromptClient, PromptKernelManager, first, kernel_seed, seed_key
from .messages import DECODING_ERRORS, MAX_MESSAGE_DEPTH, CheckedChannel, MalformedMessage, check_message
from .preprocessor import BoundedExecute

__all__ = [
    "DECODING_ERRORS", "MAX_MESSAGE_DEPTH", "RECONNECT_SECONDS", "SEED_KEY_FILE", "BoundedExecute", "CheckedChannel",
    "MalformedMessage", "PromptClient", "PromptKernelManager", "check_message", "first", "kernel_seed",
    "remove_tree", "seed_key", "throwaway_folder",
]
