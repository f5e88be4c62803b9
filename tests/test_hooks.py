"""The private hooks of jupyter_client, nbclient, nbconvert and nbgrader that rbtutor.grading overrides or calls.

rbtutor pins version ranges of these packages (pyproject.toml) because it relies on names
that are not their public API. If an upgrade renames or reshapes one, this test fails
loudly and names it, instead of grading silently going wrong.
"""

import inspect

import pytest
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient.client import NotebookClient
from nbconvert.preprocessors import ExecutePreprocessor
from nbgrader.converters.autograde import Autograde
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import Execute, OverwriteCells

# (owner, name, parameters it must accept)
HOOKS = [
    (NotebookClient, "reset_execution_trackers", []),
    (ExecutePreprocessor, "_check_assign_resources", ["resources"]),
    (NotebookClient, "setup_kernel", []),
    (NotebookClient, "async_wait_for_reply", ["msg_id"]),  # wait_for_reply is its sync wrapper
    (NotebookClient, "_get_timeout", ["cell"]),
    (NotebookClient, "output", ["outs", "msg", "display_id", "cell_index"]),
    (NotebookClient, "_update_display_id", ["display_id", "msg"]),
    (NotebookClient, "set_widgets_metadata", []),
    (NotebookClient, "create_kernel_manager", []),
    (NotebookClient, "async_start_new_kernel", []),
    (NotebookClient, "async_execute_cell", ["cell", "cell_index"]),  # execute_cell wraps it
    (Execute, "preprocess", ["nb", "resources"]),
    (OverwriteCells, "update_cell_type", ["cell", "cell_type"]),
    (OverwriteCells, "report_change", ["name", "attr", "old", "new"]),
    (OverwriteCells, "missing_cell_transform", ["source_cell", "max_score"]),
    (OverwriteCells, "add_missing_task_cells", ["nb", "resources"]),
    # PromptClient (rbtutor.grading.execute)
    (AsyncKernelClient, "_handle_kernel_info_reply", ["msg"]),
    (AsyncKernelClient, "_async_is_alive", []),
    (AsyncKernelManager, "_async_is_alive", []),
    # CheckMetadata (rbtutor.grading.restore): its per-cell check takes the base class's place
    (BaseMetadataValidator, "validate_cell", ["cell"]),
]


@pytest.mark.parametrize(("owner", "name", "params"), HOOKS, ids=[f"{o.__name__}.{n}" for o, n, _ in HOOKS])
def test_hook_is_still_there(owner, name, params):
    hook = getattr(owner, name, None)
    assert callable(hook), f"{owner.__module__}.{owner.__name__}.{name} is gone: rbtutor.grading relies on it"
    accepted = inspect.signature(hook).parameters
    missing = [p for p in params if p not in accepted]
    assert not missing, f"{owner.__name__}.{name} no longer takes {missing}: rbtutor.grading calls it with them"


def test_autograde_takes_its_preprocessors_from_configurable_lists():
    traits = Autograde.class_traits(config=True)
    assert {"sanitize_preprocessors", "autograde_preprocessors"} <= set(traits), (
        "nbgrader's Autograde no longer exposes its preprocessor lists; rbtutor's pipeline is wired through them")
    assert {"timeout", "kernel_name"} <= set(Execute.class_traits(config=True))


def test_gradebook_makes_its_engine_with_create_engine():
    """share_gradebook_engines (rbtutor.course.nbgrader) replaces nbgrader.api.create_engine, which
    Gradebook.__init__ must still call, and Gradebook.close() must still dispose of the engine.
    nbgrader's own methods are read, also when an earlier test in this process shared the engines."""
    import nbgrader.api
    from nbgrader.api import Gradebook

    assert callable(getattr(nbgrader.api, "create_engine", None))
    assert "create_engine(" in inspect.getsource(inspect.unwrap(Gradebook.__init__))
    assert "engine.dispose()" in inspect.getsource(inspect.unwrap(Gradebook.close))
