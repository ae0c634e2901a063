"""Sphinx extension: a chapter's kernel that dies while it starts is started again, on new ports.

jupyter_client chooses a kernel's ports by binding free ones, letting them go and writing them into
the kernel's connection file; the kernel binds them a moment later. Another program of the machine
can take one of them in between (jupyter/jupyter_client#487), and the kernel then exits with
"Address already in use" before it answers: myst-nb reports "Kernel died before replying to
kernel_info", and the page, and so the build, fails. The chance grows when many kernels start at
once beside other programs: the book runs a kernel per chapter in parallel, in both editions, and
``make test`` builds it while its other worker starts servers and kernels of its own.

This extension gives myst-nb's inline execution client (the version read only, :data:`REVIEWED`) a
start that tries again, at most :data:`ATTEMPTS` times in all, when the kernel died while it started.
Each attempt makes a new kernel manager, which chooses new ports. Any other failure is raised at once,
as before, and so is the last attempt's.
"""

from __future__ import annotations

import functools

import myst_nb
from myst_nb.core.execute.inline import NotebookClientInline
from sphinx.util import logging

logger = logging.getLogger(__name__)

REVIEWED = "1.4.0"  # myst-nb
ATTEMPTS = 3
DIED = "Kernel died"  # nbclient's and jupyter_client's words for a kernel process that exited


def retrying(start_client):
    """``start_client`` (of a myst-nb execution client), started again when the kernel died while starting."""

    @functools.wraps(start_client)
    def start(self):
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return start_client(self)
            except RuntimeError as error:  # nbclient's DeadKernelError is one
                if DIED not in str(error) or attempt == ATTEMPTS:
                    raise
                _clean_up(self)
                logger.info(f"{self.path}: the kernel died while it started ({error}); "
                            f"starting a new one (attempt {attempt + 1} of {ATTEMPTS})")

    return start


def _clean_up(execution_client) -> None:
    """What a failed start left: the kernel manager's files and process (nbclient has already cleaned up
    after a kernel that never answered; one that died later has not)."""
    client = getattr(execution_client, "_client", None)
    if client is not None and getattr(client, "km", None) is not None:
        try:
            client._cleanup_kernel()
        except Exception as error:  # noqa: BLE001 - the kernel is dead already; the next attempt is what matters
            logger.info(f"{execution_client.path}: cleaning up the dead kernel: {error}")


def setup(app):
    start_client = NotebookClientInline.start_client
    if myst_nb.__version__ == REVIEWED and not hasattr(start_client, "__wrapped__"):  # once per process
        NotebookClientInline.start_client = retrying(start_client)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
